import type { Usage } from "../usage-types";
import { type DashRouter, projectPath } from "../context";
import { renderPage } from "../layout";
import { RangePicker, rangeOf, UsageSection, usageQuery, windowOf } from "../usage-view";
import { ProjectHeading, withProject } from "./project";

/** The project's usage: every app's runs together, by status and latency, over 1 h, 24 h or 7 days. */
export function registerUsage(dash: DashRouter) {
  dash.get("/projects/:project_id/usage", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const range = rangeOf(c.req.query("range"));
      const window = windowOf(range, c.var.scope.deps.now());
      const usage = await c.get("api")<Usage>("GET", usageQuery(pid, window));
      return renderPage(
        c,
        {
          title: "Usage",
          projectId: pid,
          tab: "usage",
          status: usage.ok ? 200 : usage.problem.status === 404 ? 404 : 400,
        },
        <>
          <ProjectHeading project={project} title="Usage" />
          <p class="muted">
            Every run of the project's apps, synchronous and async, on the API hostname and custom domains. Each app's
            own figures are on its page under <a href={projectPath(pid, "/apps")}>Apps</a>; every run is listed under{" "}
            <a href={projectPath(pid, "/runs")}>Runs</a>.
          </p>
          <RangePicker c={c} current={range} />
          <UsageSection c={c} usage={usage} window={window} projectId={pid} idPrefix="project" />
        </>,
      );
    }),
  );
}
