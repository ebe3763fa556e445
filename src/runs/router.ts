import { createRouter } from "../platform/router";
import { cancel, readRun } from "./async";
import { cancelAsyncRun, getAsyncRun } from "./async/routes";

/**
 * The async run operations, mounted at `RUN_BASE`: an app's one reserved path, `runs/{run_id}` (`GET`
 * reads the run, `DELETE` cancels it). Every other path under an app is a run, served by `run.ts`
 * without the router.
 */
export function createAsyncRunRouter() {
  return createRouter()
    .openapi(getAsyncRun, (c) => {
      const { project_id, app_name, run_id } = c.req.valid("param");
      return readRun(c.var.scope, c.req.raw, project_id, app_name, run_id) as never;
    })
    .openapi(cancelAsyncRun, (c) => {
      const { project_id, app_name, run_id } = c.req.valid("param");
      return cancel(c.var.scope, c.req.raw, project_id, app_name, run_id) as never;
    });
}
