import { APP_NAME } from "../apps/routes";
import { ApiError } from "../platform/errors";
import { ID_PATTERN } from "../platform/ids";

/** Where the run proxy is mounted. */
export const RUN_BASE = "/v4";
/**
 * A run's path under `RUN_BASE`, as the OpenAPI document spells it: `{path}` is one or more segments of
 * the app's own (a `cortex` function such as `run`, or any route of a `custom` server, e.g.
 * `v1/chat/completions`), called as `{origin_url}/{path}`.
 */
export const RUN_ROUTE = "/{project_id}/{app_name}/{path}";
/** The same path as Hono routes it: `{path}` takes the rest of the URL path, slashes included. */
export const RUN_ROUTING_PATH = "/:project_id/:app_name/:path{.+}";
/** An async run's path under `RUN_BASE` (`GET` reads it, `DELETE` cancels it): the one path of an app the gateway keeps. */
export const ASYNC_RUN_ROUTE = "/{project_id}/{app_name}/runs/{run_id}";

/** A request path under an app; groups: project id, app name, the app's path (as sent, still percent-encoded). */
export const RUN_PATH = new RegExp(`^${RUN_BASE}/([^/?#]+)/([^/?#]+)/([^?#]+)$`);
/** A request path that names an async run; groups: project id, app name, run id. */
export const ASYNC_RUN_PATH = new RegExp(`^${RUN_BASE}/([^/?#]+)/([^/?#]+)/runs/([^/?#]+)$`);
/** The app path the gateway keeps for itself: `runs/{run_id}` (a trailing slash too). */
const RESERVED = /^runs\/[^/]+\/?$/;
export const isReservedPath = (appPath: string) => RESERVED.test(appPath);

/** The methods a run takes: every app takes GET and POST; a `custom` app's server has its own routes for the rest. */
export const RUN_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;
export const METHODS_OF = { cortex: ["GET", "POST"], custom: RUN_METHODS } as const satisfies Record<string, readonly string[]>;

/** `scheme://authority/v4/{project_id}/{app_name}/{path}` and nothing after it but a query. */
const RUN_URL = new RegExp(`^https?://([^/?#]+)(${RUN_BASE}/([^/?#]+)/([^/?#]+)/([^?#]+))(?:[?#]|$)`);
const PROJECT_ID = ID_PATTERN("proj");
const RUN_METHOD_SET: ReadonlySet<string> = new Set(RUN_METHODS);
// `.` and `..`, as sent or percent-encoded: a segment that would climb out of the deployment's base path.
const DOT_SEGMENT = /(^|\/)(\.|%2e){1,2}(\/|$)/i;

/** What a run request names. */
export interface RunTarget {
  projectId: string;
  appName: string;
  /** The app's path, as sent (still percent-encoded), without the leading slash: `run`, `v1/chat/completions`. */
  appPath: string;
}

/** A request the run entry serves itself: a run method on a well-formed run URL. */
export interface RunRequestTarget extends RunTarget {
  /** The URL's host as sent, port included. */
  authority: string;
  path: string;
}

/**
 * The run a request names, when the run entry can serve it without the router; `null` leaves it to
 * the router (HEAD or another method, a malformed id, the reserved `runs/{run_id}`), which answers it
 * the same way.
 */
export function matchRun(request: Request): RunRequestTarget | null {
  if (!RUN_METHOD_SET.has(request.method)) return null;
  const match = RUN_URL.exec(request.url);
  if (!match || !PROJECT_ID.test(match[3]!) || !APP_NAME.test(match[4]!) || isReservedPath(match[5]!) || DOT_SEGMENT.test(match[5]!)) return null;
  return { authority: match[1]!, path: match[2]!, projectId: match[3]!, appName: match[4]!, appPath: match[5]! };
}

/** The run a routed request names (the router's side of `matchRun`); a 404 problem for a malformed one. */
export function runTargetOf(pathname: string): RunTarget {
  const match = RUN_PATH.exec(pathname);
  if (!match) throw new ApiError("not_found", `No route for ${pathname}.`);
  const [, projectId, appName, appPath] = match as unknown as [string, string, string, string];
  if (!PROJECT_ID.test(projectId)) throw new ApiError("not_found", `No project with id '${projectId}'.`);
  if (!APP_NAME.test(appName)) throw new ApiError("not_found", `No app named '${appName}' in project '${projectId}'.`);
  if (DOT_SEGMENT.test(appPath)) throw new ApiError("not_found", `No route for ${pathname}: a run's path may not climb out of the app.`);
  return { projectId, appName, appPath };
}
