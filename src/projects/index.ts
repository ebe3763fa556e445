import { eq, inArray } from "drizzle-orm";
import { auditStatement } from "../audit";
import { projectMembers, projects, type Project } from "../db/schema";
import { createRouter } from "../platform/router";
import { newId } from "../platform/ids";
import { rfc3339 } from "../platform/openapi";
import { listPage } from "../platform/pagination";
import { createProject, getProject, listProjects } from "./routes";

export const projectJson = (p: Project) => ({ project_id: p.id, name: p.name, created_at: rfc3339(p.createdAt) });

export const projectsRouter = createRouter()
  .openapi(createProject, async (c) => {
    const { name } = c.req.valid("json");
    const now = c.var.scope.deps.now();
    const id = newId("proj", now.getTime());
    const db = c.var.scope.db;
    const [[project]] = await db.batch([
      db.insert(projects).values({ id, name, createdAt: now }).returning(),
      auditStatement(c, {
        action: "project.create",
        target: { type: "project", id },
        projectId: id,
        details: { name },
      }),
    ]);
    return c.json(projectJson(project!), 201);
  })
  .openapi(listProjects, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const principal = c.get("principal");
    const { items, nextCursor } = await listPage(c.var.scope.db, projects, {
      filter:
        principal.kind === "service_account"
          ? eq(projects.id, principal.projectId)
          : principal.kind === "user"
            ? inArray(
                projects.id,
                c.var.scope.db
                  .select({ id: projectMembers.projectId })
                  .from(projectMembers)
                  .where(eq(projectMembers.userId, principal.userId)),
              )
            : undefined,
      key: projects.id,
      keyOf: (p) => p.id,
      order: "desc",
      limit,
      cursor,
    });
    return c.json({ data: items.map(projectJson), next_cursor: nextCursor }, 200);
  })
  .openapi(getProject, async (c) => {
    const { project_id } = c.req.valid("param");
    const [project] = await c.var.scope.db.select().from(projects).where(eq(projects.id, project_id)).limit(1);
    // projectScope has already answered 404 for a project this credential may not see.
    return c.json(projectJson(project!), 200);
  });
