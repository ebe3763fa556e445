import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../platform/context";
import { ApiError } from "../platform/errors";

/** The request's hostname, lower case, without port or trailing dot. */
export function hostnameOf(url: string): string {
  return new URL(url).hostname.toLowerCase().replace(/\.$/, "");
}

/**
 * The one place requests are told apart by host: the service's own API hostnames get the whole
 * surface; any other host gets a 404 problem that says the host is not served here.
 */
export const hostGate = createMiddleware<AppEnv>(async (c, next) => {
  const hostname = hostnameOf(c.req.url);
  if (c.get("config").apiHostnames.has(hostname)) return next();
  throw new ApiError("unknown_host", `'${hostname}' is not served by this gateway.`);
});
