import { and, eq, inArray, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { apps, builds, type App } from "../db/schema";
import { notFound } from "../platform/errors";
import { rfc3339 } from "../platform/openapi";

export const appId = (projectId: string, name: string) => `${projectId}-${name}`;

/** The app, if it belongs to the project; a 404 otherwise (whatever another project holds). */
export async function findApp(db: Database, projectId: string, id: string): Promise<App> {
  if (!id.startsWith(`${projectId}-`)) throw notFound("app", id);
  const [app] = await db
    .select()
    .from(apps)
    .where(and(eq(apps.id, id), eq(apps.projectId, projectId)))
    .limit(1);
  if (!app) throw notFound("app", id);
  return app;
}

/** An app's current deployment: the origin of its newest succeeded build (the one definition; apps/deployments.ts caches it). */
export interface Deployment {
  appId: string;
  buildId: string;
  originUrl: string;
  deployedAt: Date;
  /** The app's runtime: how its runs are answered (src/runs/answer.ts). */
  runtime: App["runtime"];
}

/** Each app's current deployment: the origin of its newest succeeded build. */
export async function currentDeployments(db: Database, appIds: string[]): Promise<Map<string, Deployment>> {
  const result = new Map<string, Deployment>();
  if (appIds.length === 0) return result;
  // SQLite returns the other bare columns from the row that holds max(): the newest success per app.
  const rows = await db
    .select({
      appId: builds.appId,
      buildId: builds.id,
      originUrl: builds.originUrl,
      runtime: apps.runtime,
      finishedAt: sql`max(${builds.finishedAt})`.mapWith(builds.finishedAt),
    })
    .from(builds)
    .innerJoin(apps, eq(apps.id, builds.appId))
    .where(and(inArray(builds.appId, appIds), eq(builds.status, "succeeded")))
    .groupBy(builds.appId);
  for (const row of rows) {
    if (row.originUrl && row.finishedAt) {
      result.set(row.appId, {
        appId: row.appId,
        buildId: row.buildId,
        originUrl: row.originUrl,
        deployedAt: row.finishedAt,
        runtime: row.runtime,
      });
    }
  }
  return result;
}

export const appJson = (a: App, deployment: Deployment | undefined) => ({
  app_id: a.id,
  project_id: a.projectId,
  name: a.name,
  region: a.region,
  runtime: a.runtime,
  current_deployment: deployment
    ? { build_id: deployment.buildId, origin_url: deployment.originUrl, deployed_at: rfc3339(deployment.deployedAt) }
    : null,
  created_at: rfc3339(a.createdAt),
});
