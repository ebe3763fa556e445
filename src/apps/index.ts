import { eq, sql } from "drizzle-orm";
import { auditStatement } from "../audit";
import { apps } from "../db/schema";
import { ApiError, invalidField } from "../platform/errors";
import { createRouter } from "../platform/router";
import { listPage } from "../platform/pagination";
import { createApp, getApp, listApps } from "./routes";
import { appId, appJson, currentDeployments, findApp } from "./store";

export const appsRouter = createRouter()
  .openapi(createApp, async (c) => {
    const { project_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const { regions } = c.var.scope.config;
    if (!regions.includes(body.region)) {
      throw invalidField(
        "body",
        "region",
        `must be one of ${regions.join(", ")}`,
        `region must be one of ${regions.join(", ")}.`,
      );
    }
    const id = appId(project_id, body.name);
    const db = c.var.scope.db;
    const limit = c.var.scope.config.maxAppsPerProject;
    // Inserted only while the project has fewer than its most apps, in the insert itself: two creates at
    // once cannot both take the last place (D1 runs one statement at a time). Columns in the table's order.
    const [[app]] = await db.batch([
      db
        .insert(apps)
        .select(
          sql`SELECT ${id}, ${project_id}, ${body.name}, ${body.region}, ${body.runtime}, ${c.var.scope.deps.now().getTime()}
            WHERE (SELECT count(*) FROM ${apps} WHERE ${apps.projectId} = ${project_id}) < ${limit}`,
        )
        .onConflictDoNothing()
        .returning(),
      auditStatement(c, {
        action: "app.create",
        target: { type: "app", id },
        details: { region: body.region, runtime: body.runtime },
      }),
    ]);
    if (!app) {
      const [taken] = await db.select({ id: apps.id }).from(apps).where(eq(apps.id, id)).limit(1);
      if (taken) throw new ApiError("conflict", `The project already has an app named '${body.name}'.`);
      throw new ApiError(
        "conflict",
        `This project already has ${limit} apps, the most one project may have (MAX_APPS_PER_PROJECT).`,
        { extensions: { limit } },
      );
    }
    return c.json(appJson(app, undefined), 201);
  })
  .openapi(listApps, async (c) => {
    const { project_id } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const db = c.var.scope.db;
    const { items, nextCursor } = await listPage(db, apps, {
      filter: eq(apps.projectId, project_id),
      key: apps.name,
      keyOf: (a) => a.name,
      order: "asc",
      limit,
      cursor,
    });
    const deployments = await currentDeployments(
      db,
      items.map((a) => a.id),
    );
    return c.json({ data: items.map((a) => appJson(a, deployments.get(a.id))), next_cursor: nextCursor }, 200);
  })
  .openapi(getApp, async (c) => {
    const { project_id, app_id } = c.req.valid("param");
    const db = c.var.scope.db;
    const app = await findApp(db, project_id, app_id);
    const deployments = await currentDeployments(db, [app.id]);
    return c.json(appJson(app, deployments.get(app.id)), 200);
  });
