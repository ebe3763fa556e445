import { createRouter } from "../platform/router";
import { cancel, readRun } from "./async";
import { cancelAsyncRun, getAsyncRun } from "./async/routes";
import { runGet, runPost } from "./routes";
import { run } from "./run";

/**
 * The run proxy's router, mounted at `RUN_BASE`: the operations of the OpenAPI document, and the answer
 * for what the run entry leaves to the router (a HEAD, a malformed id, a trailing slash).
 */
export function createRunRouter() {
  return createRouter()
    .openapi(runPost, (c) => {
      const { project_id, app_name } = c.req.valid("param");
      return run(c.var.scope, c.req.raw, project_id, app_name) as never;
    })
    .openapi(runGet, (c) => {
      const { project_id, app_name } = c.req.valid("param");
      return run(c.var.scope, c.req.raw, project_id, app_name) as never;
    })
    .openapi(getAsyncRun, (c) => {
      const { project_id, app_name, run_id } = c.req.valid("param");
      return readRun(c.var.scope, c.req.raw, project_id, app_name, run_id) as never;
    })
    .openapi(cancelAsyncRun, (c) => {
      const { project_id, app_name, run_id } = c.req.valid("param");
      return cancel(c.var.scope, c.req.raw, project_id, app_name, run_id) as never;
    });
}
