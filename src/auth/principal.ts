import type { Role } from "../db/schema";
import type { Permission } from "./permissions";

/**
 * Who made a request: the operator (admin token), a service account of one project, or a person
 * signed in to the dashboard (OpenID Connect), whose rights in a project come from their role there.
 */
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
    }
  | {
      kind: "user";
      userId: string;
      /** As their provider last said; shown where the person acts (the audit log, the dashboard). */
      email: string | null;
      /** Their membership of the request's project: set by `projectScope` on `/projects/{project_id}/…` routes. */
      member?: { id: string; projectId: string; role: Role };
    };

/**
 * Whether the credential alone admits `projectId`. A person is admitted only by a membership, which
 * `projectScope` looks up; this answers false for them.
 */
export const canAccessProject = (principal: Principal, projectId: string) =>
  principal.kind === "admin" || (principal.kind === "service_account" && principal.projectId === projectId);
