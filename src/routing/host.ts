import { type CustomDomainRoute, routeForHost } from "../domains/lookup";
import { ApiError } from "../platform/errors";
import type { Scope } from "../platform/scope";
import type { RunTarget } from "../runs/path";

/** The request's hostname, lower case (the URL parser's), without port or trailing dot. */
const hostnameOf = (url: URL): string => (url.hostname.endsWith(".") ? url.hostname.slice(0, -1) : url.hostname);

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
function checkServedOnDomain(route: CustomDomainRoute, target: RunTarget | null): void {
  const { hostname } = route;
  if (route.status !== "validated") {
    throw new ApiError(
      "unknown_host",
      `'${hostname}' is a custom domain that is not validated yet (status ${route.status}); its owner can see why and validate it in the dashboard.`,
    );
  }
  if (!target)
    throw new ApiError("not_found", `${hostname} serves only /v4/{project_id}/{app_name}/{path} of its own project.`);
  if (target.projectId !== route.projectId)
    throw new ApiError("not_found", `No project with id '${target.projectId}' on ${hostname}.`);
}

/**
 * The one place requests are told apart by host, for every request: the service's own API hostnames
 * get the whole surface; a validated custom domain gets only the run paths of its own project (and
 * its certificate validation token); any other host gets a 404 problem that says why. `url` is the
 * request's one parse and `target` what its path names, the same the run or the router then serves.
 * Certificate validation paths are never passed to an app: their answer is returned here.
 */
export async function gateHost(scope: Scope, url: URL, target: RunTarget | null): Promise<Response | null> {
  const hostname = hostnameOf(url);
  if (scope.config.apiHostnames.has(hostname)) return null;
  const route = await knownDomain(scope, hostname);
  const path = url.pathname;
  if (CERTIFICATE_VALIDATION.test(path)) {
    if (route.challenge?.path === path)
      return new Response(route.challenge.body, {
        headers: { "Content-Type": "text/plain; charset=UTF-8", "Cache-Control": "no-store" },
      });
    throw new ApiError("not_found", `No certificate validation token at ${path} for ${hostname}.`);
  }
  checkServedOnDomain(route, target);
  return null;
}
