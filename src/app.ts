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
  installErrorHandling(app);
  return app;
}
