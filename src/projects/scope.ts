import { eq } from "drizzle-orm";
import { createMiddleware } from "hono/factory";
import { canAccessProject } from "../auth/principal";
import { projects } from "../db/schema";
import { membershipOf } from "../auth/membership";
import type { AppEnv } from "../platform/scope";
import { ApiError } from "../platform/errors";

/**
 * Guards every `/projects/{project_id}/…` route: a credential of another project gets the same 404 as
 * a project that does not exist, so it cannot even learn that the id is taken. A person is admitted by
 * their membership, and their role in the project is resolved here, once, for the checks after it.
 */
export const projectScope = createMiddleware<AppEnv>(async (c, next) => {
  const projectId = c.req.param("project_id") ?? "";
  const principal = c.get("principal");
  const missing = new ApiError("not_found", `No project with id '${projectId}'.`);
  if (principal.kind === "user") {
    // A membership row exists only for an existing project (it is deleted with its project).
    const member = await membershipOf(c.var.scope.db, projectId, principal.userId);
    if (!member) throw missing;
    c.set("principal", { ...principal, member: { ...member, projectId } });
    return next();
  }
  if (!canAccessProject(principal, projectId)) throw missing;
  // A live service account proves its project exists (accounts are deleted with their project).
  if (principal.kind === "admin") {
    const [found] = await c.var.scope.db
      .select({ id: projects.id })
      .from(projects)
      .where(eq(projects.id, projectId))
      .limit(1);
    if (!found) throw missing;
  }
  await next();
});
