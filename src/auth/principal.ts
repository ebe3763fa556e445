/** Who made a request: the operator (admin token) or a service account of one project. */
export type Principal =
  | { kind: "admin" }
  | { kind: "service_account"; serviceAccountId: string; projectId: string };

export const canAccessProject = (principal: Principal, projectId: string) =>
  principal.kind === "admin" || principal.projectId === projectId;
