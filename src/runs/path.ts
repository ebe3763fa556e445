import { APP_NAME } from "../apps/routes";
import { ApiError } from "../platform/errors";
import { ID_PATTERN } from "../platform/ids";
import { RUN_BASE } from "./urls";

/** Where the run proxy is mounted (`urls.ts` builds a run's URLs under it). */
export { RUN_BASE };

/**
 * The run route under `RUN_BASE`, as the OpenAPI document spells it: `{path}` is one or more segments of
 * the app's own (a `cortex` function such as `run`, or any route of a `custom` server, e.g.
 * `v1/chat/completions`), called as `{origin_url}/{path}`.
 */
export const RUN_ROUTE = "/{project_id}/{app_name}/{path}";
/** An async run's route under `RUN_BASE` (`GET` reads it, `DELETE` cancels it): the one path of an app the gateway keeps. */
export const ASYNC_RUN_ROUTE = "/{project_id}/{app_name}/runs/{run_id}";

/** The methods a run takes: every app takes GET and POST; a `custom` app's server has its own routes for the rest. */
export const RUN_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;
export const METHODS_OF = { cortex: ["GET", "POST"], custom: RUN_METHODS } as const satisfies Record<
  string,
  readonly string[]
>;

/** The app path the gateway keeps for itself: `runs/{run_id}` (a trailing slash too). */
const RESERVED = /^runs\/[^/]+\/?$/;
/** A path under an app: project id, app name, the app's path. */
const UNDER_AN_APP = new RegExp(`^${RUN_BASE}/([^/]+)/([^/]+)/(.+)$`);
const PROJECT_ID = ID_PATTERN("proj");

/** What a path under `RUN_BASE` names. */
export interface RunTarget {
  projectId: string;
  appName: string;
  /** The app's path, percent-encoded as in the URL, without the leading slash: `run`, `v1/chat/completions`. */
  appPath: string;
}

/**
 * The app a path names, or `null` for a path that is not under one. `pathname` is a WHATWG URL's: the
 * form the host gate checks and the app receives. Its dot segments are already resolved (`..`, `%2e%2e`,
 * and `..\` or `.<tab>.`, which the parser reads as `..`), so a path under an app cannot climb out of it:
 * parsing the raw string instead would let each reader see a different path.
 */
export function pathTarget(pathname: string): (RunTarget & { reserved: boolean }) | null {
  const match = UNDER_AN_APP.exec(pathname);
  if (!match) return null;
  const appPath = match[3]!;
  return { projectId: match[1]!, appName: match[2]!, appPath, reserved: RESERVED.test(appPath) };
}

/** A path that names a project and an app but no function of the app: `/v4/{project_id}/{app_name}`. */
const APP_WITHOUT_PATH = new RegExp(`^${RUN_BASE}/([^/]+)/([^/]+)/?$`);

/**
 * What a caller meant by a path under `RUN_BASE` that names no function of the app: the form of a
 * run's URL, with theirs filled in. Nothing is looked up: the same words whether the app exists or not.
 */
export function runPathHint(pathname: string): string | null {
  const match = APP_WITHOUT_PATH.exec(pathname);
  if (!match) return null;
  const [, project, app] = match;
  return (
    `A run's URL names the app's function after the app: ${RUN_BASE}/{project_id}/{app_name}/{path}, ` +
    `e.g. ${RUN_BASE}/${project}/${app}/run for a cortex app's \`run\` function, or the route of a custom app's server.`
  );
}

/** `target` when its project id and app name are well formed; a 404 problem that says which is not. */
export function checkedTarget(target: RunTarget): RunTarget {
  const { projectId, appName } = target;
  if (!PROJECT_ID.test(projectId)) throw new ApiError("not_found", `No project with id '${projectId}'.`);
  if (!APP_NAME.test(appName)) throw new ApiError("not_found", `No app named '${appName}' in project '${projectId}'.`);
  return target;
}

/** The gateway's own query parameters, never passed to the app. */
const OURS = new Set(["webhookEndpoint", "async"]);
export const isGatewayParam = (name: string) => OURS.has(name);

/**
 * `{origin_url}/{path}` with the caller's query parameters (but ours) after the origin's own. The path
 * is the app's path as the URL parser read it (`pathTarget`): percent-encoded, its dot segments
 * resolved, so it stays below the origin's base path.
 */
export function appUrl(originUrl: string, appPath: string, query: URLSearchParams | null): string {
  const url = new URL(originUrl);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/${appPath}`;
  if (query !== null) {
    for (const [name, value] of query) {
      if (!OURS.has(name)) url.searchParams.append(name, value);
    }
  }
  return url.href;
}
