import { createDashboard, DASHBOARD_BASE } from "./dashboard";
import { home } from "./docs/home";
import { createManagementApi } from "./management";
import type { Deps } from "./platform/deps";
import { installErrorHandling } from "./platform/not-found";
import { createRouter } from "./platform/router";
import { routerWayIn } from "./platform/request";
import { RUN_BASE, runPathHint } from "./runs/path";
import { createAsyncRunRouter } from "./runs/router";

/**
 * The router of every request but a run (`worker.ts` sends runs straight to `runs/run.ts`): the
 * management API, the async run operations, the dashboard and the docs. The host gate has already
 * let the request in.
 */
export function createHttpRouter(deps: Deps) {
  const router = createRouter();
  router.use(routerWayIn(deps));
  router.get("/", home);
  router.route("/v2", createManagementApi());
  router.route(RUN_BASE, createAsyncRunRouter());
  // The dashboard calls the API through this same router, so the API's rules are the dashboard's.
  router.route(
    DASHBOARD_BASE,
    createDashboard((request, env, ctx) => Promise.resolve(router.fetch(request, env, ctx))),
  );
  installErrorHandling(router, { hint: runPathHint });
  return router;
}
