import { and, eq } from "drizzle-orm";
import { appId, currentDeployments } from "../apps/store";
import type { Database } from "../db/client";
import { apps } from "../db/schema";
import { TtlCache } from "../platform/cache";
import { ApiError } from "../platform/errors";
import { RUN_CACHE_TTL_MS } from "./run-key";

export interface Upstream {
  appId: string;
  buildId: string;
  originUrl: string;
}

/** Current deployments by app id. Only found ones are kept, so a first deployment is used at once. */
export const deploymentCache = new TtlCache<Upstream>(RUN_CACHE_TTL_MS);

/** The upstream of `{project_id}/{app_name}`: a 404 when there is no such app, a 409 when it has no ready deployment. */
export async function upstreamOf(db: Database, projectId: string, appName: string, now: number): Promise<Upstream> {
  const id = appId(projectId, appName);
  const cached = deploymentCache.get(id, now);
  if (cached) return cached;
  const deployment = (await currentDeployments(db, [id])).get(id);
  if (deployment) {
    const upstream = { appId: id, buildId: deployment.buildId, originUrl: deployment.originUrl };
    deploymentCache.set(id, upstream, now);
    return upstream;
  }
  const [app] = await db.select({ id: apps.id }).from(apps).where(and(eq(apps.id, id), eq(apps.projectId, projectId))).limit(1);
  if (!app) throw new ApiError("not_found", `No app named '${appName}' in project '${projectId}'.`);
  throw new ApiError("no_deployment", `The app '${appName}' has no succeeded build yet; runs start once a build succeeds.`);
}
