import { APP_NAME } from "../apps/routes";
import { ID_PATTERN } from "../platform/ids";

/** Where the run proxy is mounted. */
export const RUN_BASE = "/v4";
/** The run operation's path under `RUN_BASE`, as the OpenAPI document spells it: the one definition of it. */
export const RUN_ROUTE = "/{project_id}/{app_name}/run";

// `/v4/([^/?#]+)/([^/?#]+)/run`: every parameter of RUN_ROUTE becomes one path segment.
const RUN_PATH_SOURCE = `${RUN_BASE}${RUN_ROUTE.replace(/\{[a-z_]+\}/g, "([^/?#]+)")}`;
/** A request path that names a run (a trailing slash too); groups: project id, app name. */
export const RUN_PATH = new RegExp(`^${RUN_PATH_SOURCE}/?$`);
/** An async run's path under `RUN_BASE` (`GET` reads it, `DELETE` cancels it). */
export const ASYNC_RUN_ROUTE = "/{project_id}/{app_name}/runs/{run_id}";
/** A request path that names an async run; groups: project id, app name, run id. */
export const ASYNC_RUN_PATH = new RegExp(`^${RUN_BASE}${ASYNC_RUN_ROUTE.replace(/\{[a-z_]+\}/g, "([^/?#]+)")}$`);

/** `scheme://authority/v4/{project_id}/{app_name}/run` and nothing after it but a query. */
const RUN_URL = new RegExp(`^https?://([^/?#]+)(${RUN_PATH_SOURCE})(?:\\?|$)`);
const PROJECT_ID = ID_PATTERN("proj");

/** A request the run entry serves itself: GET or POST of a well-formed run URL. */
export interface RunTarget {
  /** The URL's host as sent, port included. */
  authority: string;
  path: string;
  projectId: string;
  appName: string;
}

/**
 * The run a request names, when the run entry can serve it without the router; `null` leaves it to
 * the router (another method, a malformed id, a trailing slash), which answers it the same way.
 */
export function matchRun(request: Request): RunTarget | null {
  if (request.method !== "GET" && request.method !== "POST") return null;
  const match = RUN_URL.exec(request.url);
  if (!match || !PROJECT_ID.test(match[3]!) || !APP_NAME.test(match[4]!)) return null;
  return { authority: match[1]!, path: match[2]!, projectId: match[3]!, appName: match[4]! };
}
