import { createRouter } from "../platform/router";
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
    });
}
