import { type DashRouter, projectPath } from "../context";
import { renderPage } from "../layout";
import { RangePicker, rangeOf, UsageSection, usageFor } from "../usage-view";
import { ProjectHeading, withProject } from "./project";

/** The project's usage: every app's runs together, by status and latency, where the runs are or over 1 h, 24 h or 7 days. */
export function registerUsage(dash: DashRouter) {
  dash.get("/projects/:project_id/usage", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      // By default the window opens where the project's runs are, not on a day whose runs are one bar at its edge.
      const range = rangeOf(c.req.query("range"), "fit");
      const { window, usage } = await usageFor(c, pid, range);
      return renderPage(
        c,
        {
          title: "Usage",
          projectId: pid,
          tab: "usage",
          status: usage === null || usage.ok ? 200 : usage.problem.status === 404 ? 404 : 400,
        },
        <>
          <ProjectHeading project={project} title="Usage" />
          <p class="muted">
            Every run of the project's apps, synchronous and async, on the API hostname and custom domains. Each app's
            own figures are on its page under <a href={projectPath(pid, "/apps")}>Apps</a>; every run is listed under{" "}
            <a href={projectPath(pid, "/runs")}>Runs</a>.
          </p>
          <RangePicker c={c} current={range} fit />
          <UsageSection c={c} usage={usage} window={window} projectId={pid} idPrefix="project" />
        </>,
      );
    }),
  );
}
