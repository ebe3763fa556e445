import type { Permission } from "./permissions";

/** Who made a request: the operator (admin token) or a service account of one project. */
export type Principal =
  | { kind: "admin" }
  | {
      kind: "service_account";
      serviceAccountId: string;
      projectId: string;
      /** Its name when it signed this request: the audit log shows it beside the id. */
      name: string;
      /** What it may do in its project: the `scopes` it was created with. */
      permissions: readonly Permission[];
      /** The tokens it creates may live no longer than it does. */
      expiresAt: Date;
    };

export const canAccessProject = (principal: Principal, projectId: string) =>
  principal.kind === "admin" || principal.projectId === projectId;
