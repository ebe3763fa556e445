import { and, eq, inArray, sql } from "drizzle-orm";
import { findApp } from "../apps/store";
import { auditAs, auditStatement } from "../audit";
import type { Database } from "../db/client";
import { builds, type Build, type BuildStatus } from "../db/schema";
import { ApiError, invalidField, notFound } from "../platform/errors";
import { createRouter } from "../platform/router";
import { newId } from "../platform/ids";
import { rfc3339, rfc3339OrNull } from "../platform/openapi";
import { listPage } from "../platform/pagination";
import { checkOutboundUrl } from "../platform/url-policy";
import { forgetDeployment } from "../apps/deployments";
import { cancelBuild, getBuild, listBuilds, reportBuild, startBuild } from "./routes";

export const buildJson = (b: Build) => ({
  build_id: b.id,
  app_id: b.appId,
  project_id: b.projectId,
  status: b.status,
  origin_url: b.originUrl,
  error: b.error,
  created_at: rfc3339(b.createdAt),
  updated_at: rfc3339(b.updatedAt),
  started_at: rfc3339OrNull(b.startedAt),
  finished_at: rfc3339OrNull(b.finishedAt),
  cancelled_at: rfc3339OrNull(b.cancelledAt),
});

/** The states a build may move to each state from. */
const MOVES_TO: Record<Exclude<BuildStatus, "queued">, BuildStatus[]> = {
  building: ["queued"],
  succeeded: ["building"],
  failed: ["queued", "building"],
  cancelled: ["queued", "building"],
};

const buildScope = (projectId: string, appId: string, buildId: string) =>
  and(eq(builds.id, buildId), eq(builds.appId, appId), eq(builds.projectId, projectId));

async function findBuild(db: Database, projectId: string, appId: string, buildId: string): Promise<Build> {
  const [build] = await db
    .select()
    .from(builds)
    .where(buildScope(projectId, appId, buildId))
    .limit(1);
  if (!build) throw notFound("build", buildId);
  return build;
}

export const buildsRouter = createRouter()
  .openapi(startBuild, async (c) => {
    const { project_id, app_id } = c.req.valid("param");
    const db = c.var.scope.db;
    const app = await findApp(db, project_id, app_id);
    const now = c.var.scope.deps.now();
    const id = newId("bld", now.getTime());
    const [[build]] = await db.batch([
      db
        .insert(builds)
        .values({ id, appId: app.id, projectId: project_id, status: "queued", createdAt: now, updatedAt: now })
        .returning(),
      auditStatement(c, { action: "build.start", target: { type: "build", id }, details: { app_id: app.id } }),
    ]);
    return c.json(buildJson(build!), 201);
  })
  .openapi(listBuilds, async (c) => {
    const { project_id, app_id } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const db = c.var.scope.db;
    const app = await findApp(db, project_id, app_id);
    const { items, nextCursor } = await listPage(db, builds, {
      filter: eq(builds.appId, app.id),
      key: builds.id,
      keyOf: (b) => b.id,
      order: "desc",
      limit,
      cursor,
    });
    return c.json({ data: items.map(buildJson), next_cursor: nextCursor }, 200);
  })
  .openapi(getBuild, async (c) => {
    const { project_id, app_id, build_id } = c.req.valid("param");
    return c.json(buildJson(await findBuild(c.var.scope.db, project_id, app_id, build_id)), 200);
  })
  .openapi(reportBuild, async (c) => {
    const { project_id, app_id, build_id } = c.req.valid("param");
    const report = c.req.valid("json");
    auditAs(c, { action: "build.report", target: { type: "build", id: build_id }, details: { status: report.status } });
    if (report.status === "succeeded") {
      // The gateway will send runs there: the same SSRF rules as webhook endpoints.
      const check = checkOutboundUrl(report.origin_url, { allowInsecure: c.var.scope.config.allowInsecureTargets });
      if (!check.ok) {
        throw invalidField("body", "origin_url", check.reason);
      }
    }
    const db = c.var.scope.db;
    const now = c.var.scope.deps.now();
    const finished = report.status !== "building";
    // One conditional UPDATE: whichever of a report and a cancel reaches D1 first wins; the other matches no row.
    const [updated] = await db
      .update(builds)
      .set({
        status: report.status,
        updatedAt: now,
        ...(report.status === "building" ? { startedAt: sql`coalesce(${builds.startedAt}, ${now.getTime()})` } : {}),
        ...(finished ? { finishedAt: now } : {}),
        ...(report.status === "succeeded" ? { originUrl: report.origin_url } : {}),
        ...(report.status === "failed" ? { error: report.error ?? null } : {}),
      })
      .where(and(buildScope(project_id, app_id, build_id), inArray(builds.status, MOVES_TO[report.status])))
      .returning();
    if (updated) {
      if (updated.status === "succeeded") forgetDeployment(updated.appId);
      return c.json(buildJson(updated), 200);
    }

    const build = await findBuild(db, project_id, app_id, build_id);
    if (build.status === "cancelled") {
      throw new ApiError(
        "build_cancelled",
        `The build was cancelled at ${build.cancelledAt?.toISOString()}; stop building.`,
      );
    }
    const repeated =
      build.status === report.status && (report.status !== "succeeded" || build.originUrl === report.origin_url);
    if (repeated) return c.json(buildJson(build), 200);
    throw new ApiError("invalid_transition", `A ${build.status} build cannot become ${report.status}.`);
  })
  .openapi(cancelBuild, async (c) => {
    const { project_id, app_id, build_id } = c.req.valid("param");
    auditAs(c, { action: "build.cancel", target: { type: "build", id: build_id } });
    const db = c.var.scope.db;
    const now = c.var.scope.deps.now();
    const [cancelled] = await db
      .update(builds)
      .set({ status: "cancelled", cancelledAt: now, finishedAt: now, updatedAt: now })
      .where(and(buildScope(project_id, app_id, build_id), inArray(builds.status, MOVES_TO.cancelled)))
      .returning();
    if (cancelled) return c.json(buildJson(cancelled), 200);

    const build = await findBuild(db, project_id, app_id, build_id);
    if (build.status === "cancelled") return c.json(buildJson(build), 200);
    throw new ApiError(
      "build_not_cancellable",
      `The build already ${build.status === "succeeded" ? "succeeded" : "failed"}; only queued or building builds can be cancelled.`,
    );
  });
