import { createDashboard, DASHBOARD_BASE } from "./dashboard";
import { home } from "./docs/home";
import { createManagementApi } from "./management";
import type { Deps } from "./platform/deps";
import { installErrorHandling } from "./platform/not-found";
import { createRouter } from "./platform/router";
import { scopeMiddleware } from "./platform/scope";
import { hostGate } from "./routing/host";
import { RUN_BASE, RUN_PATH } from "./runs/path";
import { createRunRouter } from "./runs/router";

/**
 * The router of the whole HTTP surface: every request the run entry (`run-entry.ts`) does not take.
 * It holds the run operations too, so the OpenAPI document has them and the router can answer any
 * run request the same way (the parity test holds the two entries to that).
 */
export function createHttpRouter(deps: Deps) {
  const router = createRouter();
  router.use(scopeMiddleware(deps));
  router.use(hostGate);
  router.get("/", home);
  router.route("/v2", createManagementApi());
  router.route(RUN_BASE, createRunRouter());
  // The dashboard calls the API through this same router, so the API's rules are the dashboard's.
  router.route(DASHBOARD_BASE, createDashboard((request, env, ctx) => Promise.resolve(router.fetch(request, env, ctx))));
  // A run refuses HEAD (it would run the app for an answer nobody reads): no 405 offers it there.
  installErrorHandling(router, { headRefused: [RUN_PATH] });
  return router;
}
