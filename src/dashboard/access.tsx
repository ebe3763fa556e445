import type { Permission } from "../auth/permissions";
import { mayManageMembers, roleAllows } from "../auth/roles";
import type { Access, DashContext } from "./context";

/** Set by `withProject` for a project's pages; the operator's elsewhere. */
const accessOf = (c: DashContext): Access => c.get("access") ?? { role: "operator" };

export const can = (c: DashContext, permission: Permission) => {
  const { role } = accessOf(c);
  return role === "operator" || roleAllows(role, permission);
};

export const canManageMembers = (c: DashContext) => {
  const { role } = accessOf(c);
  return role === "operator" || mayManageMembers(role);
};

/** Said where a control would be, so nobody wonders where it went. */
export function NotAllowed({ c, doing }: { c: DashContext; doing: string }) {
  const { role } = accessOf(c);
  return (
    <p class="alert info" role="note">
      Your role in this project is <strong>{role}</strong>: it does not allow {doing}. An owner of the project can
      change your role.
    </p>
  );
}
