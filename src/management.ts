import { appsRouter } from "./apps";
import { auditRouter, auditWrites } from "./audit";
import { authenticate } from "./auth/middleware";
import { buildsRouter } from "./builds";
import { domainsRouter } from "./domains";
import { registerDocs } from "./docs";
import { createRouter } from "./platform/router";
import { membersRouter } from "./members";
import { jsonBody } from "./platform/middleware";
import { projectsRouter } from "./projects";
import { projectScope } from "./projects/scope";
import { rateLimitByIp, rateLimitByToken } from "./platform/rate-limit";
import { serviceAccountsRouter } from "./service-accounts";
import { webhooksRouter } from "./webhooks";
import { receiverControlsRouter } from "./webhooks/receiver-api";
import { asyncRunsRouter } from "./runs/async";
import { RUN_PROXY_ROUTES } from "./runs/async/routes";
import { usageRouter } from "./usage";
import { liveRouter } from "./usage/live";

/** Request bodies of the management API are small JSON documents. */
export const MANAGEMENT_BODY_LIMIT_BYTES = 64 * 1024;

/** The management API, mounted at `/v2`. Every `/projects` route needs a bearer credential. */
export function createManagementApi() {
  const v2 = createRouter();
  v2.use("/projects/*", rateLimitByIp, authenticate, rateLimitByToken);
  v2.use("/projects/:project_id/*", projectScope);
  v2.use("/projects/*", jsonBody(MANAGEMENT_BODY_LIMIT_BYTES));
  v2.use("/projects/*", auditWrites);
  v2.route("/", projectsRouter);
  v2.route("/", serviceAccountsRouter);
  v2.route("/", appsRouter);
  v2.route("/", buildsRouter);
  v2.route("/", webhooksRouter);
  v2.route("/", receiverControlsRouter);
  v2.route("/", domainsRouter);
  v2.route("/", membersRouter);
  v2.route("/", auditRouter);
  v2.route("/", asyncRunsRouter);
  // Before the usage API: `…/runs/under-way` and `…/runs/events` are not run ids.
  v2.route("/", liveRouter);
  v2.route("/", usageRouter);
  registerDocs(v2, RUN_PROXY_ROUTES);
  return v2;
}
