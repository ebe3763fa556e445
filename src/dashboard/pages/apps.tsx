import { listQuery, type Page, type Problem, seg } from "../api";
import { type DashContext, type DashRouter, projectPath } from "../context";
import {
  Badge,
  type BadgeTone,
  ConfirmAction,
  ConfirmForm,
  DataTable,
  Pager,
  ProblemMessage,
  when,
} from "../components";
import { can } from "../access";
import { renderPage } from "../layout";
import { Sparkline } from "../charts";
import { count, duration } from "../format";
import { eachLimited } from "../../platform/concurrency";
import type { AppItem, BuildItem, ProjectItem, Usage } from "../api-types";
import { RangePicker, rangeOf, UsageSection, usageFor, usageQuery, type UsageWindow } from "../usage-view";
import { ProjectHeading, withProject } from "./project";

const STATUS_BADGE: Record<BuildItem["status"], BadgeTone> = {
  queued: "info",
  building: "info",
  succeeded: "ok",
  failed: "bad",
  cancelled: "neutral",
};
const STATUS_LABEL: Record<BuildItem["status"], string> = {
  queued: "Queued",
  building: "Building",
  succeeded: "Succeeded",
  failed: "Failed",
  cancelled: "Cancelled",
};
/** The spec's cancel operation applies to ongoing builds only. */
const isOngoing = (b: BuildItem) => b.status === "queued" || b.status === "building";

/** Apps per page of the list: each row asks the usage API for its figures where the project's runs are. */
const APPS_PER_PAGE = 25;
/**
 * Usage calls in flight at once for the list: each reaches the project's usage store (a subrequest),
 * and an invocation may hold 6 outbound connections; 4 leaves room for the page's other calls.
 */
const USAGE_CALLS_AT_ONCE = 4;

/**
 * Each app's figures, by name, over the window where the project's runs of the last 7 days are (so a new
 * project's runs are bars across the sparkline, not one at its edge); none when the 7 days hold no run.
 * An app whose figures could not be read is left out.
 */
async function recentOf(c: DashContext, pid: string, apps: AppItem[]) {
  const found = new Map<string, Usage>();
  const { window, usage } = await usageFor(c, pid, "fit");
  if (usage === null || !usage.ok) return { window: null, found };
  await eachLimited(apps, USAGE_CALLS_AT_ONCE, async (a) => {
    const one = await c.get("api")<Usage>("GET", usageQuery(pid, window, a.name));
    if (one.ok) found.set(a.name, one.data);
  });
  return { window, found };
}

/** An app's recent runs in a row of the list: bars where the project's runs are, then runs, errors and p95 in words. */
function Recent({ usage, window }: { usage: Usage | undefined; window: UsageWindow | null }) {
  if (window === null) return <span class="muted">no runs in 7 days</span>;
  if (!usage) return <span class="muted">–</span>;
  const t = usage.totals;
  if (t.runs === 0) return <span class="muted">no runs</span>;
  const errors = t.status_4xx + t.status_5xx;
  const tally = `${count(t.runs)} ${t.runs === 1 ? "run" : "runs"}, ${count(errors)} ${errors === 1 ? "error" : "errors"}`;
  const words = `${tally}, p95 ${duration(t.p95_ms)}`;
  const points = new Map(usage.series.map((p) => [Date.parse(p.start), p]));
  const at = (start: number) => points.get(start);
  return (
    <div class="last-day">
      <Sparkline
        ok={window.starts.map((s) => at(s)?.status_2xx ?? 0)}
        failed={window.starts.map((s) => (at(s)?.status_4xx ?? 0) + (at(s)?.status_5xx ?? 0))}
        label={`Runs per ${window.interval} ${window.during}: ${words}`}
      />
      <span aria-hidden="true">
        {tally}
        <br />
        <span class="muted">p95 {duration(t.p95_ms)}</span>
      </span>
    </div>
  );
}

async function appsPage(c: DashContext, project: ProjectItem) {
  const pid = project.project_id;
  const apps = await c.get("api")<Page<AppItem>>("GET", `/projects/${seg(pid)}/apps?${listQuery(c, APPS_PER_PAGE)}`);
  const recent = apps.ok ? await recentOf(c, pid, apps.data.data) : { window: null, found: new Map<string, Usage>() };
  return renderPage(
    c,
    { title: "Apps and builds", projectId: pid, tab: "apps" },
    <>
      <ProjectHeading project={project} title="Apps" />
      {!apps.ok ? (
        <ProblemMessage problem={apps.problem} action="Loading apps" />
      ) : apps.data.data.length === 0 ? (
        <p>
          No apps yet. Create one with <code>POST /v2/projects/{pid}/apps</code> using a token from{" "}
          <a href={projectPath(pid, "/api-keys")}>API Keys</a>.
        </p>
      ) : (
        <DataTable
          caption="Apps"
          columns={[
            "App",
            { label: "Region", optional: true },
            { label: "Runtime", optional: true },
            "Current deployment",
            "Recent runs",
          ]}
          footer={<Pager path={projectPath(pid, "/apps")} next={apps.data.next_cursor} />}
        >
          {apps.data.data.map((a) => (
            <tr>
              <td>
                <a href={projectPath(pid, `/apps/${seg(a.app_id)}`)}>{a.name}</a>
              </td>
              <td class="optional nowrap">{a.region}</td>
              <td class="optional">{a.runtime}</td>
              <td>
                {a.current_deployment ? (
                  <>
                    <code>{a.current_deployment.origin_url}</code>
                    <br />
                    <span class="muted">
                      build <code>{a.current_deployment.build_id}</code>, {when(a.current_deployment.deployed_at)}
                    </span>
                  </>
                ) : (
                  <Badge tone="neutral">Not deployed</Badge>
                )}
              </td>
              <td>
                <Recent usage={recent.found.get(a.name)} window={recent.window} />
              </td>
            </tr>
          ))}
        </DataTable>
      )}
    </>,
  );
}

async function buildsPage(
  c: DashContext,
  project: ProjectItem,
  options: { problem?: Problem; cancelledId?: string | undefined } = {},
) {
  const pid = project.project_id;
  const appId = c.req.param("app_id") ?? "";
  const api = c.get("api");
  const [app, builds] = await Promise.all([
    api<AppItem>("GET", `/projects/${seg(pid)}/apps/${seg(appId)}`),
    api<Page<BuildItem>>("GET", `/projects/${seg(pid)}/apps/${seg(appId)}/builds?${listQuery(c, 50)}`),
  ]);
  if (!app.ok) {
    return renderPage(
      c,
      { title: "App not found", projectId: pid, tab: "apps", status: 404 },
      <>
        <h1>App not found</h1>
        <ProblemMessage problem={app.problem} />
        <p>
          <a href={projectPath(pid, "/apps")}>All apps of the project</a>
        </p>
      </>,
    );
  }
  const range = rangeOf(c.req.query("range"), "fit");
  const { window, usage } = await usageFor(c, pid, range, app.data.name);
  const csrf = c.get("csrf");
  const cancelled =
    options.cancelledId && builds.ok
      ? builds.data.data.find((b) => b.build_id === options.cancelledId && b.status === "cancelled")
      : undefined;
  return renderPage(
    c,
    {
      title: `${app.data.name} builds`,
      projectId: pid,
      tab: "apps",
      status: options.problem ? (options.problem.status === 404 ? 404 : 409) : 200,
    },
    <>
      <p>
        <a href={projectPath(pid, "/apps")}>← Apps</a>
      </p>
      <ProjectHeading project={project} title={app.data.name} />
      <p class="muted">
        {app.data.region} · {app.data.runtime} · current deployment:{" "}
        {app.data.current_deployment ? <code>{app.data.current_deployment.origin_url}</code> : "none"}
      </p>
      {cancelled && (
        <div class="alert success" role="status">
          <p>
            Build <code>{cancelled.build_id}</code> was cancelled.
          </p>
        </div>
      )}
      {options.problem && <ProblemMessage problem={options.problem} action="The build was not cancelled" />}
      <h2>Usage</h2>
      <RangePicker c={c} current={range} fit />
      <UsageSection c={c} usage={usage} window={window} projectId={pid} appName={app.data.name} idPrefix="app" />
      <p>
        <a href={`${projectPath(pid, "/runs")}?app_name=${seg(app.data.name)}`}>Every run of {app.data.name}</a>
      </p>
      <h2>Builds</h2>
      {!builds.ok ? (
        <ProblemMessage problem={builds.problem} action="Loading builds" />
      ) : builds.data.data.length === 0 ? (
        <p>No builds yet.</p>
      ) : (
        <DataTable
          caption={<>Builds of {app.data.name}</>}
          columns={["Build", "Status", { label: "Created", optional: true }, { label: "Finished", optional: true }]}
          actions
          footer={<Pager path={projectPath(pid, `/apps/${seg(appId)}`)} next={builds.data.next_cursor} />}
        >
          {builds.data.data.map((b) => (
            <tr id={`build-${b.build_id}`}>
              <td>
                <code>{b.build_id}</code>
                {b.error && <p class="field-error">{b.error}</p>}
              </td>
              <td>
                <Badge tone={STATUS_BADGE[b.status]}>{STATUS_LABEL[b.status]}</Badge>
              </td>
              <td class="optional">{when(b.created_at)}</td>
              <td class="optional">{b.finished_at ? when(b.finished_at) : <span class="muted">—</span>}</td>
              <td>
                {isOngoing(b) && can(c, "builds:write") && (
                  <ConfirmAction
                    id={`cancel-${b.build_id}`}
                    label="Cancel"
                    href={projectPath(pid, `/apps/${seg(appId)}/builds/${b.build_id}/cancel`)}
                    action={projectPath(pid, `/apps/${seg(appId)}/builds/${b.build_id}/cancel`)}
                    csrf={csrf}
                    title="Cancel this build?"
                    question={
                      <>
                        Build <code>{b.build_id}</code> stops; the builder is told to stop at its next report. The
                        current deployment stays as it is.
                      </>
                    }
                    confirmLabel="Cancel build"
                  />
                )}
              </td>
            </tr>
          ))}
        </DataTable>
      )}
    </>,
  );
}

export function registerApps(dash: DashRouter) {
  dash.get("/projects/:project_id/apps", (c) => withProject(c, (project) => appsPage(c, project)));
  dash.get("/projects/:project_id/apps/:app_id", (c) =>
    withProject(c, (project) => buildsPage(c, project, { cancelledId: c.req.query("cancelled") })),
  );

  dash.get("/projects/:project_id/apps/:app_id/builds/:build_id/cancel", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const appPath = projectPath(pid, `/apps/${seg(c.req.param("app_id"))}`);
      return renderPage(
        c,
        { title: "Cancel build", projectId: pid, tab: "apps" },
        <div class="card">
          <ConfirmForm
            id="cancel"
            action={`${appPath}/builds/${seg(c.req.param("build_id"))}/cancel`}
            csrf={c.get("csrf")}
            title="Cancel this build?"
            question={
              <>
                Build <code>{c.req.param("build_id")}</code> stops. The current deployment stays as it is.
              </>
            }
            confirmLabel="Cancel build"
            cancelHref={appPath}
          />
        </div>,
      );
    }),
  );

  dash.post("/projects/:project_id/apps/:app_id/builds/:build_id/cancel", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const appId = c.req.param("app_id");
      const buildId = c.req.param("build_id");
      const result = await c.get("api")<BuildItem>(
        "DELETE",
        `/projects/${seg(pid)}/apps/${seg(appId)}/builds/${seg(buildId)}`,
      );
      if (!result.ok) return buildsPage(c, project, { problem: result.problem });
      return c.redirect(projectPath(pid, `/apps/${seg(appId)}?cancelled=${seg(buildId)}`), 303);
    }),
  );
}
