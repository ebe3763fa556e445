import { newId } from "./platform/ids";
import { logRequest, withInvocation } from "./platform/log";
import type { Deps } from "./platform/deps";
import { problemFor } from "./platform/render-error";
import { createScope } from "./platform/scope";
import { gateRun } from "./routing/host";
import { RUN_BASE, RUN_ROUTE, type RunRequestTarget } from "./runs/path";
import { run } from "./runs/run";

/** The run's route as the router's request line names it (`/v4/:project_id/:app_name/run`). */
const RUN_ROUTE_PATTERN = `${RUN_BASE}${RUN_ROUTE.replace(/\{([a-z_]+)\}/g, ":$1")}`;

/**
 * The run entry of the Worker: runs without the router. Runs are what the service exists for, and the
 * benchmark showed Hono's context, middleware chain and validators to be a third of the gateway's own
 * cost per run. It does what the router does for these requests, with the same functions and in the
 * same order (scope, host gate, `run`, problem rendering); `src/runs/parity.test.ts` holds the two to it.
 */
export async function serveRun(request: Request, env: Env, ctx: ExecutionContext, deps: Deps, target: RunRequestTarget): Promise<Response> {
  const started = Date.now();
  const requestId = newId("req");
  const fields = { request_id: requestId, project_id: target.projectId, route: RUN_ROUTE_PATTERN };
  const response = await withInvocation(fields, async () => {
    try {
      const scope = createScope(env, ctx, deps, requestId);
      await gateRun(scope, request.url, target.authority, target.path);
      return await run(scope, request, target);
    } catch (error) {
      return problemFor(error, { requestId, method: request.method, route: RUN_ROUTE_PATTERN });
    }
  });
  response.headers.set("X-Request-Id", requestId);
  const runId = response.headers.get("x-run-id");
  logRequest({ ...fields, method: request.method, status: response.status, duration_ms: Date.now() - started, ...(runId ? { run_id: runId } : {}) });
  return response;
}
