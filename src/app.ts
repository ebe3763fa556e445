import { createDashboard, DASHBOARD_BASE } from "./dashboard";
import { home } from "./docs/home";
import { createManagementApi } from "./management";
import { type Deps, defaultDeps } from "./platform/context";
import type { Env } from "./platform/env";
import { createRouter, installErrorHandling } from "./platform/factory";
import { requestId, services } from "./platform/middleware";
import { hostGate } from "./routing/host";
import { createRunProxy } from "./runs";
import { fastRun } from "./runs/fast-path";

/**
 * The whole HTTP surface of the Worker. Tests build their own with other `deps` (a fake clock, say);
 * `fastPath: false` sends runs through the router too, to prove both answer alike.
 */
export function createApp(deps: Deps = defaultDeps, { fastPath = true } = {}) {
  const app = createRouter();
  app.use(requestId);
  app.use(services(deps));
  app.use(hostGate);
  app.get("/", home);
  app.route("/v2", createManagementApi());
  app.route("/v4", createRunProxy());
  // The dashboard calls the API through this same app, so the API's rules are the dashboard's.
  app.route(DASHBOARD_BASE, createDashboard((request, env, ctx) => Promise.resolve(app.fetch(request, env, ctx))));
  installErrorHandling(app);
  if (!fastPath) return app;
  // Runs take the fast path (`runs/fast-path.ts`), everything else the router; `app.request` too.
  const route = app.fetch;
  app.fetch = (request, env, ctx) =>
    (env && ctx ? fastRun(request, env as Env, ctx, deps) : null) ?? route(request, env, ctx);
  return app;
}
