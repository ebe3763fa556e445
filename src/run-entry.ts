import { newId } from "./platform/ids";
import type { Deps } from "./platform/deps";
import { problemFor } from "./platform/render-error";
import { createScope } from "./platform/scope";
import { gateRun } from "./routing/host";
import type { RunRequestTarget } from "./runs/path";
import { run } from "./runs/run";

/**
 * The run entry of the Worker: runs without the router. Runs are what the service exists for, and the
 * benchmark showed Hono's context, middleware chain and validators to be a third of the gateway's own
 * cost per run. It does what the router does for these requests, with the same functions and in the
 * same order (scope, host gate, `run`, problem rendering); `src/runs/parity.test.ts` holds the two to it.
 */
export async function serveRun(request: Request, env: Env, ctx: ExecutionContext, deps: Deps, target: RunRequestTarget): Promise<Response> {
  let requestId: string | undefined;
  let response: Response;
  try {
    const scope = createScope(env, ctx, deps);
    requestId = scope.requestId;
    await gateRun(scope, request.url, target.authority, target.path);
    response = await run(scope, request, target);
  } catch (error) {
    requestId ??= newId("req");
    response = problemFor(error, { requestId, method: request.method, path: target.path });
  }
  response.headers.set("X-Request-Id", requestId);
  return response;
}
