import type { z } from "@hono/zod-openapi";
import type { AsyncRunSummary } from "../../runs/async/routes";
import { type Page, seg } from "../api";
import { can, NotAllowed } from "../access";
import { type DashContext, type DashRouter, projectPath } from "../context";
import { Badge, type BadgeTone, DataTable, Pager, ProblemMessage, when } from "../components";
import { renderPage } from "../layout";
import { type Project, ProjectHeading, withProject } from "./project";

/** What the API answers for each run (`GET /v2/projects/{project_id}/async-runs`): its own response schema. */
type Run = z.infer<typeof AsyncRunSummary>;

const STATUS_TONE: Record<Run["status"], BadgeTone> = { queued: "neutral", running: "info", succeeded: "ok", failed: "bad", cancelled: "warn" };
const STATUS_LABEL: Record<Run["status"], string> = { queued: "Queued", running: "Running", succeeded: "Succeeded", failed: "Failed", cancelled: "Cancelled" };
const STATUSES = Object.keys(STATUS_LABEL) as Run["status"][];

/** The API's error codes (src/runs/async/routes.ts), in words. */
const ERROR_TEXT: Record<string, string> = {
  upstream_status: "the app answered an error status",
  bad_gateway: "the app could not be reached or answered badly",
  gateway_timeout: "the app did not answer in time",
  interrupted: "the worker running it stopped; not run again",
  expired: "never started",
};

const PAGE_SIZE = 20;

function duration(ms: number | null) {
  if (ms === null) return <span class="muted">–</span>;
  return ms < 1000 ? <>{ms} ms</> : <>{(ms / 1000).toFixed(1)} s</>;
}

async function runsPage(c: DashContext, project: Project) {
  const pid = project.project_id;
  // Listing async runs needs runs:invoke (their results are the runs' answers), which a viewer lacks.
  if (!can(c, "runs:invoke")) {
    return renderPage(
      c,
      { title: "Runs", projectId: pid, tab: "runs" },
      <>
        <ProjectHeading project={project} title="Runs" />
        <NotAllowed c={c} doing="seeing the project's async runs and their results" />
      </>,
    );
  }
  const wanted = c.req.query("status");
  const status = STATUSES.find((s) => s === wanted);
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (status) query.set("status", status);
  const cursor = c.req.query("cursor");
  if (cursor) query.set("cursor", cursor);
  const list = await c.get("api")<Page<Run>>("GET", `/projects/${seg(pid)}/async-runs?${query}`);
  const path = projectPath(pid, "/runs");
  const deliveries = projectPath(pid, "/webhook-deliveries");
  return renderPage(
    c,
    { title: "Runs", projectId: pid, tab: "runs", status: list.ok ? 200 : list.problem.status === 404 ? 404 : 400 },
    <>
      <ProjectHeading project={project} title="Runs" />
      <p class="muted">
        Runs started with <code>?async=true</code>, newest first. Read one's result at its <code>status_url</code>; results are kept 7 days.
      </p>
      <nav aria-label="Filter runs by status" class="filter">
        <a href={path} aria-current={status ? undefined : "page"}>
          All
        </a>
        {STATUSES.map((s) => (
          <>
            {" · "}
            <a href={`${path}?status=${s}`} aria-current={status === s ? "page" : undefined}>
              {STATUS_LABEL[s]}
            </a>
          </>
        ))}
      </nav>
      {!list.ok ? (
        <ProblemMessage problem={list.problem} action="Loading runs" />
      ) : list.data.data.length === 0 ? (
        <p>{status ? `No ${STATUS_LABEL[status].toLowerCase()} runs.` : "No async runs yet."}</p>
      ) : (
        <DataTable caption={<>Async runs{status ? ` (${STATUS_LABEL[status]})` : ""}</>} columns={["Run", "Status", "Duration", "Outcome", "Webhook"]} class="cards" footer={<Pager path={path} next={list.data.next_cursor} query={status ? { status } : undefined} />}>
          {list.data.data.map((r) => (
            <tr id={`run-${r.run_id}`}>
              <td data-label="Run">
                <code>{r.run_id}</code>
                <br />
                <span class="muted">
                  app {r.app_name}, created {when(r.created_at)}
                </span>
              </td>
              <td data-label="Status">
                <Badge tone={STATUS_TONE[r.status]}>{STATUS_LABEL[r.status]}</Badge>
              </td>
              <td data-label="Duration">{duration(r.duration_ms)}</td>
              <td data-label="Outcome">
                {r.status_code !== null && <>HTTP {r.status_code}</>}
                {r.error && (
                  <>
                    {r.status_code !== null && <br />}
                    <code>{r.error.code}</code>
                    {ERROR_TEXT[r.error.code] && <span class="muted"> ({ERROR_TEXT[r.error.code]})</span>}
                  </>
                )}
                {r.status_code === null && !r.error && <span class="muted">not yet</span>}
              </td>
              <td data-label="Webhook">
                {r.webhook_endpoint ? <a href={`${deliveries}?run_id=${seg(r.run_id)}`}>Deliveries</a> : <span class="muted">none</span>}
              </td>
            </tr>
          ))}
        </DataTable>
      )}
    </>,
  );
}

export function registerRuns(dash: DashRouter) {
  dash.get("/projects/:project_id/runs", (c) => withProject(c, (project) => runsPage(c, project)));
}
