import { createMiddleware } from "hono/factory";
import { type CustomDomainRoute, routeForHost } from "../domains/lookup";
import { ApiError } from "../platform/errors";
import type { AppEnv, Scope } from "../platform/scope";
import { RUN_PATH } from "../runs/path";

/** The request's hostname, lower case, without port or trailing dot. */
export function hostnameOf(url: string): string {
  return new URL(url).hostname.toLowerCase().replace(/\.$/, "");
}

/** Paths certificate issuers fetch to validate a hostname (ACME HTTP-01, CA/B Forum file-based DCV). */
const CERTIFICATE_VALIDATION = /^\/\.well-known\/(acme-challenge|pki-validation)(\/|$)/;

/** The custom domain `hostname` names; a 404 problem when it names none. */
async function knownDomain(scope: Scope, hostname: string): Promise<CustomDomainRoute> {
  const route = await routeForHost(scope.db, hostname, scope.deps.now().getTime());
  if (!route) throw new ApiError("unknown_host", `'${hostname}' is not served by this gateway.`);
  return route;
}

/**
 * A custom domain serves the run paths of its own project once validated, as on the default address
 * (every path of its apps, the async runs' `runs/{run_id}` included: a `status_url` names the host the
 * run was started on); anything else is a problem that says why.
 */
function checkServedOnDomain(route: CustomDomainRoute, path: string): void {
  const { hostname } = route;
  if (route.status !== "validated") {
    throw new ApiError(
      "unknown_host",
      `'${hostname}' is a custom domain that is not validated yet (status ${route.status}); its owner can see why and validate it in the dashboard.`,
    );
  }
  const run = RUN_PATH.exec(path);
  if (!run) throw new ApiError("not_found", `${hostname} serves only /v4/{project_id}/{app_name}/{path} of its own project.`);
  if (run[1] !== route.projectId) throw new ApiError("not_found", `No project with id '${run[1]}' on ${hostname}.`);
}

/**
 * The one place requests are told apart by host: the service's own API hostnames get the whole
 * surface; a validated custom domain gets only the run path of its own project; any other host
 * gets a 404 problem that says why. Certificate validation paths are never passed to an app.
 */
export const hostGate = createMiddleware<AppEnv>(async (c, next) => {
  const hostname = hostnameOf(c.req.url);
  if (c.var.scope.config.apiHostnames.has(hostname)) return next();
  const route = await knownDomain(c.var.scope, hostname);
  const path = c.req.path;
  if (CERTIFICATE_VALIDATION.test(path)) {
    if (route.challenge?.path === path) return c.text(route.challenge.body, 200, { "Cache-Control": "no-store" });
    throw new ApiError("not_found", `No certificate validation token at ${path} for ${hostname}.`);
  }
  checkServedOnDomain(route, path);
  return next();
});

/**
 * `hostGate` for the run entry: `authority` is the URL's host as sent (a run path is never a
 * certificate validation path). The service's own hostnames are recognised without parsing the URL.
 */
export async function gateRun(scope: Scope, url: string, authority: string, path: string): Promise<void> {
  const { apiHostnames } = scope.config;
  const quick = authority.toLowerCase().replace(/:\d+$/, "").replace(/\.$/, "");
  if (apiHostnames.has(quick)) return;
  const hostname = hostnameOf(url);
  if (apiHostnames.has(hostname)) return;
  checkServedOnDomain(await knownDomain(scope, hostname), path);
}
