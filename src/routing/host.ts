import { createMiddleware } from "hono/factory";
import type { Database } from "../db/client";
import { type CustomDomainRoute, routeForHost } from "../domains/lookup";
import type { AppEnv } from "../platform/context";
import type { Config } from "../platform/env";
import { ApiError } from "../platform/errors";

/** The request's hostname, lower case, without port or trailing dot. */
export function hostnameOf(url: string): string {
  return new URL(url).hostname.toLowerCase().replace(/\.$/, "");
}

/** Paths certificate issuers fetch to validate a hostname (ACME HTTP-01, CA/B Forum file-based DCV). */
const CERTIFICATE_VALIDATION = /^\/\.well-known\/(acme-challenge|pki-validation)(\/|$)/;
/** The one surface a custom domain serves: the run path (and an async run's status path), as on the default address. */
const RUN_PATH = /^\/v4\/([^/]+)\/([^/]+)\/(run\/?|runs\/[^/]+)$/;

/** The custom domain `hostname` names; a 404 problem when it names none. */
async function knownDomain(db: Database, hostname: string, now: number): Promise<CustomDomainRoute> {
  const route = await routeForHost(db, hostname, now);
  if (!route) throw new ApiError("unknown_host", `'${hostname}' is not served by this gateway.`);
  return route;
}

/** A custom domain serves the run path of its own project once validated; anything else is a problem that says why. */
function servedOnDomain(route: CustomDomainRoute, path: string): CustomDomainRoute {
  const { hostname } = route;
  if (route.status !== "validated") {
    throw new ApiError(
      "unknown_host",
      `'${hostname}' is a custom domain that is not validated yet (status ${route.status}); its owner can see why and validate it in the dashboard.`,
    );
  }
  const run = RUN_PATH.exec(path);
  if (!run) throw new ApiError("not_found", `${hostname} serves only /v4/{project_id}/{app_name}/run of its own project.`);
  if (run[1] !== route.projectId) throw new ApiError("not_found", `No project with id '${run[1]}' on ${hostname}.`);
  return route;
}

/**
 * The one place requests are told apart by host: the service's own API hostnames get the whole
 * surface; a validated custom domain gets only the run path of its own project; any other host
 * gets a 404 problem that says why. Certificate validation paths are never passed to an app.
 */
export const hostGate = createMiddleware<AppEnv>(async (c, next) => {
  const hostname = hostnameOf(c.req.url);
  if (c.get("config").apiHostnames.has(hostname)) return next();
  const route = await knownDomain(c.get("db"), hostname, c.get("deps").now().getTime());
  const path = c.req.path;
  if (CERTIFICATE_VALIDATION.test(path)) {
    if (route.challenge?.path === path) return c.text(route.challenge.body, 200, { "Cache-Control": "no-store" });
    throw new ApiError("not_found", `No certificate validation token at ${path} for ${hostname}.`);
  }
  c.set("customDomain", servedOnDomain(route, path));
  return next();
});

/**
 * `hostGate` for the run fast path: `authority` is the URL's host as sent (a run path is never a
 * certificate validation path). The service's own hostnames are recognised without parsing the URL.
 */
export async function gateRun(config: Config, db: Database, now: number, url: string, authority: string, path: string): Promise<void> {
  const quick = authority.toLowerCase().replace(/:\d+$/, "").replace(/\.$/, "");
  if (config.apiHostnames.has(quick)) return;
  const hostname = hostnameOf(url);
  if (config.apiHostnames.has(hostname)) return;
  servedOnDomain(await knownDomain(db, hostname, now), path);
}
