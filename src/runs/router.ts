import { accepts } from "hono/accepts";
import { createRouter } from "../platform/router";
import { cancel, followRunStatus, readRun } from "./async";
import { cancelAsyncRun, getAsyncRun } from "./async/routes";

const JSON_CONTENT_TYPE = "application/json";
const EVENTS_TYPE = "text/event-stream";

/**
 * The async run operations, mounted at `RUN_BASE`: an app's one reserved path, `runs/{run_id}` (`GET`
 * reads the run, `DELETE` cancels it). Every other path under an app is a run, served by `run.ts`
 * without the router.
 */
export function createAsyncRunRouter() {
  return createRouter()
    .openapi(getAsyncRun, (c) => {
      const { project_id, app_name, run_id } = c.req.valid("param");
      // `Accept: text/event-stream` (an EventSource's) follows the run; anything else reads it once.
      const follow = accepts(c, {
        header: "Accept",
        supports: [JSON_CONTENT_TYPE, EVENTS_TYPE],
        default: JSON_CONTENT_TYPE,
      });
      const answer = follow === EVENTS_TYPE && c.req.method === "GET" ? followRunStatus : readRun;
      return answer(c.var.scope, c.req.raw, project_id, app_name, run_id) as never;
    })
    .openapi(cancelAsyncRun, (c) => {
      const { project_id, app_name, run_id } = c.req.valid("param");
      return cancel(c.var.scope, c.req.raw, project_id, app_name, run_id) as never;
    });
}
