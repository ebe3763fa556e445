import { ApiError } from "../platform/errors";
import { createRouter } from "../platform/router";
import { cancel, readRun } from "./async";
import { cancelAsyncRun, getAsyncRun } from "./async/routes";
import { isReservedPath, RUN_METHODS, RUN_ROUTING_PATH, runTargetOf } from "./path";
import { run } from "./run";

/**
 * The run proxy's router, mounted at `RUN_BASE`: an app's one reserved path (`runs/{run_id}`, the async
 * run), then every other path of the app, which the run entry (`run-entry.ts`) serves too; the router
 * answers what the entry leaves to it (HEAD, a malformed id) the same way. The run operations are
 * documented in the OpenAPI document from `RUN_PROXY_ROUTES`; `{path}` spans segments, which a
 * zod-openapi route cannot, so the runs are routed with Hono's own pattern.
 */
export function createRunRouter() {
  const router = createRouter()
    .openapi(getAsyncRun, (c) => {
      const { project_id, app_name, run_id } = c.req.valid("param");
      return readRun(c.var.scope, c.req.raw, project_id, app_name, run_id) as never;
    })
    .openapi(cancelAsyncRun, (c) => {
      const { project_id, app_name, run_id } = c.req.valid("param");
      return cancel(c.var.scope, c.req.raw, project_id, app_name, run_id) as never;
    });
  // GET also takes HEAD (Hono answers HEAD with the GET handler); the run refuses it with 405.
  router.on([...RUN_METHODS], RUN_ROUTING_PATH, (c) => {
    const target = runTargetOf(new URL(c.req.url).pathname);
    if (isReservedPath(target.appPath)) {
      throw new ApiError("method_not_allowed", `${c.req.method} is not allowed on an async run; use GET or DELETE. runs/{run_id} is the gateway's own path under an app.`, {
        headers: { Allow: "DELETE, GET" },
      });
    }
    return run(c.var.scope, c.req.raw, target);
  });
  return router;
}
