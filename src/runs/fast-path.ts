import { APP_NAME } from "../apps/routes";
import { createDb } from "../db/client";
import type { Deps } from "../platform/context";
import { type Env, getConfig } from "../platform/env";
import { problemFor } from "../platform/factory";
import { ID_PATTERN, newId } from "../platform/ids";
import { gateRun } from "../routing/host";
import { run } from "./index";

/** `scheme://authority/v4/{project_id}/{app_name}/run` and nothing after it but a query. */
const RUN_URL = /^https?:\/\/([^/?#]+)(\/v4\/([^/?#]+)\/([^/?#]+)\/run)(?:\?|$)/;
const PROJECT_ID = ID_PATTERN("proj");

/**
 * The run path without the router. Runs are what the service exists for, and the benchmark showed
 * Hono's context, middleware chain and validators to be a third of the gateway's own cost per run.
 * This does what the router's chain does for these requests, in the same order and with the same
 * functions (request id, configuration, host gate, `run`, problem rendering); anything it does not
 * recognise exactly (another method, a malformed id, a trailing slash) is left to the router,
 * which answers it as before. `null` means "not mine".
 */
export function fastRun(request: Request, env: Env, ctx: Pick<ExecutionContext, "waitUntil">, deps: Deps): Promise<Response> | null {
  if (request.method !== "GET" && request.method !== "POST") return null;
  const match = RUN_URL.exec(request.url);
  if (!match || !PROJECT_ID.test(match[3]!) || !APP_NAME.test(match[4]!)) return null;
  return serve(request, env, ctx, deps, match[1]!, match[2]!, match[3]!, match[4]!);
}

async function serve(
  request: Request,
  env: Env,
  ctx: Pick<ExecutionContext, "waitUntil">,
  deps: Deps,
  authority: string,
  path: string,
  projectId: string,
  appName: string,
): Promise<Response> {
  const requestId = newId("req");
  let response: Response;
  try {
    const config = getConfig(env);
    const db = createDb(env.DB);
    await gateRun(config, db, deps.now().getTime(), request.url, authority, path);
    response = await run({ request, env, ctx, deps, config, db, requestId }, projectId, appName);
  } catch (error) {
    response = problemFor(error, { requestId, method: request.method, path });
  }
  response.headers.set("X-Request-Id", requestId);
  return response;
}
