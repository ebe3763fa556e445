import { createDashboard, DASHBOARD_BASE } from "./dashboard";
import { createManagementApi } from "./management";
import { type Deps, defaultDeps } from "./platform/context";
import { createRouter, installErrorHandling } from "./platform/factory";
import { requestId, services } from "./platform/middleware";
import { hostGate } from "./routing/host";
import { createRunProxy } from "./runs";

/** The whole HTTP surface of the Worker. Tests build their own with other `deps` (a fake clock, say). */
export function createApp(deps: Deps = defaultDeps) {
  const app = createRouter();
  app.use(requestId);
  app.use(services(deps));
  app.use(hostGate);
  app.route("/v2", createManagementApi());
  app.route("/v4", createRunProxy());
  // The dashboard calls the API through this same app, so the API's rules are the dashboard's.
  app.route(DASHBOARD_BASE, createDashboard((request, env, ctx) => Promise.resolve(app.fetch(request, env, ctx))));
  installErrorHandling(app);
  return app;
}
