import type { Principal } from "./principal";

/**
 * The callers whose async runs `principal` lists (`GET /v2/projects/{project_id}/async-runs`), or
 * `undefined` for all of them: the operator and the project's owners see every run, a service account
 * its own, any other member the runs made as them. Those rows lead to the runs' stored results.
 */
export function listedCallers(principal: Principal): string[] | undefined {
  switch (principal.kind) {
    case "admin":
      return undefined;
    case "service_account":
      return ["", `sa:${principal.serviceAccountId}`];
    case "user":
      return principal.member?.role === "owner" ? undefined : ["", `user:${principal.userId}`];
  }
}

/**
 * The callers whose run records `principal` lists (`GET /v2/projects/{project_id}/runs`), or
 * `undefined` for all of them. A record holds no body and no result, so every person whose role has
 * `usage:read` sees the project's runs (the dashboard shows the project); a service account sees the
 * runs it made itself, as with its async runs.
 */
export function recordCallers(principal: Principal): string[] | undefined {
  return principal.kind === "service_account" ? [`sa:${principal.serviceAccountId}`] : undefined;
}
