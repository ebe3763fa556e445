import { createMiddleware } from "hono/factory";
import type { Deps } from "./deps";
import { ID_BODY, newId } from "./ids";
import { logRequest, withInvocation } from "./log";
import { problemFor } from "./render-error";
import { type AppEnv, createScope, parentRequestOf, routeOf, type Scope } from "./scope";

/**
 * The one way in of an HTTP request, around whatever serves it (the run entry or the router): its id,
 * its scope, the problem anything thrown becomes, `X-Request-Id`, and its one log line. Written once,
 * so no entry can skip or copy it.
 */

/** What the request's log line says besides its status: filled in by whoever served it. */
export interface RequestLine {
  /** The pattern of the route that answered (`/v2/projects/:project_id/apps`), never the path. */
  route: string;
}

type Serve = (scope: Scope, line: RequestLine) => Response | Promise<Response>;

// The scope and line of a request being served, for the router's own middleware to take up.
const served = new WeakMap<Request, { scope: Scope; line: RequestLine }>();

const PROJECT_IN_PATH = new RegExp(`/(proj_${ID_BODY})(?:/|$)`);

/**
 * Serves `request` through `serve` inside the wrapper. `pathname` is the request's path as parsed once
 * by the caller (the WHATWG form the app and the host gate see). A configuration error (the scope
 * cannot be built) is a problem like any other.
 */
export async function serveRequest(
  request: Request,
  pathname: string,
  env: Env,
  ctx: Pick<ExecutionContext, "waitUntil">,
  deps: Deps,
  serve: Serve,
): Promise<Response> {
  const started = Date.now();
  const parent = parentRequestOf(request);
  const requestId = parent ?? newId("req");
  const projectId = PROJECT_IN_PATH.exec(pathname)?.[1];
  const line: RequestLine = { route: "(none)" };
  const fields = { request_id: requestId, ...(projectId ? { project_id: projectId } : {}) };
  const response = await withInvocation(fields, async () => {
    try {
      const scope = createScope(env, ctx, deps, requestId);
      served.set(request, { scope, line });
      return await serve(scope, line);
    } catch (error) {
      return problemFor(error, { requestId, method: request.method, route: line.route });
    }
  });
  response.headers.set("X-Request-Id", requestId);
  const runId = response.headers.get("x-run-id");
  logRequest({
    ...fields,
    method: request.method,
    route: line.route,
    status: response.status,
    duration_ms: Date.now() - started,
    ...(runId ? { run_id: runId } : {}),
    ...(parent ? { via: "in-process" } : {}),
  });
  return response;
}

/**
 * The router's first middleware: takes up the scope the wrapper built and names the route in its line.
 * A router driven without the Worker's entry (the dashboard's in-process API calls, a unit test's
 * `app.request`) is served through the same wrapper here.
 */
export const routerWayIn = (deps: Deps) =>
  createMiddleware<AppEnv>(async (c, next) => {
    const take = async (scope: Scope, line: RequestLine) => {
      c.set("scope", scope);
      await next();
      line.route = routeOf(c);
      return c.res;
    };
    const outer = served.get(c.req.raw);
    if (outer) {
      await take(outer.scope, outer.line);
      return;
    }
    // `executionCtx` is read when work is handed to it, not before: a router driven without one
    // (Hono's `app.request` in a unit test) still serves what needs none.
    const ctx = { waitUntil: (work: Promise<unknown>) => c.executionCtx.waitUntil(work) };
    const response = await serveRequest(c.req.raw, new URL(c.req.url).pathname, c.env, ctx, deps, take);
    // A problem the wrapper made itself (the scope could not be built) replaces the router's answer.
    if (response !== c.res) c.res = response;
  });
