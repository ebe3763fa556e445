/**
 * The one builder of a run's URLs: `{RUN_BASE}/{project_id}/{app_name}/runs/{run_id}` (`ASYNC_RUN_ROUTE`)
 * on the host the caller used (the service's hostname or the project's custom domain). Every run that has
 * a state to read (async, or waited and handed over) is read (`GET`), cancelled (`DELETE`) and followed
 * (`GET` with `Accept: text/event-stream`) at that one URL; a 202's `Location` and `status_url` are it too.
 */

/** Where the run proxy is mounted. */
export const RUN_BASE = "/v4";

/** What names a run with a status URL. */
export interface RunAddress {
  projectId: string;
  appName: string;
  runId: string;
}

/** The run's status URL: absolute, on the origin of `requestUrl` (the URL the caller called). */
export const runUrl = (requestUrl: string, run: RunAddress): string =>
  new URL(`${RUN_BASE}/${run.projectId}/${run.appName}/runs/${run.runId}`, requestUrl).href;

/** Where a run is read, cancelled and followed: the same URL for each, named for what the caller does. */
export interface RunUrls {
  get: string;
  cancel: string;
  stream: string;
}

export function runUrls(requestUrl: string, run: RunAddress): RunUrls {
  const url = runUrl(requestUrl, run);
  return { get: url, cancel: url, stream: url };
}
