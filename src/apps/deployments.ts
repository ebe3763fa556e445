import { and, eq } from "drizzle-orm";
import type { Database } from "../db/client";
import { apps } from "../db/schema";
import { TtlCache } from "../platform/cache";
import { ApiError } from "../platform/errors";
import { appId, currentDeployments } from "./store";

/**
 * How long this isolate routes runs to a deployment it looked up without asking D1 again. A new
 * deployment is used at once by the isolate that recorded it (`forgetDeployment`), by others within
 * this time.
 */
export const DEPLOYMENT_CACHE_TTL_MS = 30_000;

export interface Deployment {
  appId: string;
  buildId: string;
  originUrl: string;
  runtime: "cortex" | "custom";
}

/** Current deployments by app id. Only found ones are kept, so a first deployment is used at once. */
const deployments = new TtlCache<Deployment>(DEPLOYMENT_CACHE_TTL_MS);

/** The deployment of `{project_id}/{app_name}`: a 404 when there is no such app, a 409 when it has no ready deployment. */
export async function deploymentOf(db: Database, projectId: string, appName: string, now: number): Promise<Deployment> {
  const id = appId(projectId, appName);
  const cached = deployments.get(id, now);
  if (cached) return cached;
  const current = (await currentDeployments(db, [id])).get(id);
  if (current) {
    const deployment = {
      appId: id,
      buildId: current.buildId,
      originUrl: current.originUrl,
      runtime: current.runtime,
    };
    deployments.set(id, deployment, now);
    return deployment;
  }
  const [app] = await db
    .select({ id: apps.id })
    .from(apps)
    .where(and(eq(apps.id, id), eq(apps.projectId, projectId)))
    .limit(1);
  if (!app) throw new ApiError("not_found", `No app named '${appName}' in project '${projectId}'.`);
  throw new ApiError(
    "no_deployment",
    `The app '${appName}' has no succeeded build yet; runs start once a build succeeds.`,
  );
}

/** Makes this isolate route the app's runs to its newest deployment at once. */
export function forgetDeployment(appId: string): void {
  deployments.delete(appId);
}
