import type { Context } from "hono";
import { matchedRoutes } from "hono/route";
import { createDb, type Database } from "../db/client";
import type { Deps } from "./deps";
import { type Config, getConfig } from "./env";
import { newId } from "./ids";

/**
 * Everything one invocation of the Worker works with: a request, a queue batch or a cron tick. Every
 * entry point builds it with `createScope`, so a handler, a consumer and the cron see the service the
 * same way.
 */
export interface Scope {
  /** Echoed as `X-Request-Id` and quoted in every problem and log line of the invocation. */
  requestId: string;
  env: Env;
  ctx: Pick<ExecutionContext, "waitUntil">;
  config: Config;
  db: Database;
  deps: Deps;
}

/** The scope of one invocation. Throws the configuration problem when a setting is missing or malformed. */
export function createScope(
  env: Env,
  ctx: Pick<ExecutionContext, "waitUntil">,
  deps: Deps,
  requestId: string = newId("req"),
): Scope {
  return { requestId, env, ctx, config: getConfig(env), db: createDb(env.DB), deps };
}

/**
 * Requests the Worker makes to its own router in-process (the dashboard's API calls), with the id of
 * the request they serve: they share it, so a person's one click is one id in the logs, the audit log
 * and the problem the page shows. Held by the Request object itself, so nothing from outside can claim it.
 */
const innerRequests = new WeakMap<Request, string>();

/** Marks `request` as made in-process while serving `requestId`. */
export function insideRequest(request: Request, requestId: string): Request {
  innerRequests.set(request, requestId);
  return request;
}

/** The id of the request an in-process request serves, if it is one. */
export const parentRequestOf = (request: Request): string | undefined => innerRequests.get(request);

/**
 * The pattern of the route that answered (`/v2/projects/:project_id/apps`), never the path. After
 * `next`, the route index is the last handler that ran: the route's own when it answered, a
 * middleware's (`use`, method ALL) when one threw first; then the route the request was headed for.
 */
export function routeOf<E extends AppEnv>(c: Context<E>): string {
  const routes = matchedRoutes(c);
  const ran = routes[c.req.routeIndex];
  const route = ran && ran.method !== "ALL" ? ran : routes.filter((r) => r.method !== "ALL").at(-1);
  // `:path{.+}` (a parameter spanning segments) is logged as `:path`: the pattern, not its regex.
  return route?.path.replace(/\{[^}]*\}/g, "") ?? "(none)";
}

/** The Hono environment of every router: the bindings, and the invocation's scope. */
export interface AppEnv {
  Bindings: Env;
  Variables: { scope: Scope };
}
