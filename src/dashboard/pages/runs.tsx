import { type Page, seg } from "../api";
import { type DashContext, type DashRouter, projectPath } from "../context";
import { Badge, type BadgeTone, DataTable, FilterActions, Pager, ProblemMessage, when } from "../components";
import { Caller, callerNames, type CallerNames } from "../callers";
import { OutcomeBadge, runPath } from "../run-outcome";
import { bytes, duration } from "../format";
import { renderPage } from "../layout";
import type { AppItem, ProjectItem, RunRecordItem, RunRecordPage, RunUnderWay, RunUnderWayList } from "../api-types";
import { RANGES, type Range, RunCommand } from "../usage-view";
import { ProjectHeading, withProject } from "./project";

const PAGE_SIZE = 25;
const UNDER_WAY_SHOWN = 10;
const MODES = { sync: "Synchronous", wait: "Waited", async: "Async" } as const satisfies Record<
  RunRecordItem["mode"],
  string
>;
const STATUS_CLASSES = { "2xx": "2xx success", "4xx": "4xx refused", "5xx": "5xx failed" } as const;

const WEBHOOK_TONE: Record<NonNullable<RunRecordItem["webhook"]>["status"], BadgeTone> = {
  pending: "info",
  held: "warn",
  delivered: "ok",
  failed: "bad",
};
const WEBHOOK_LABEL: Record<NonNullable<RunRecordItem["webhook"]>["status"], string> = {
  pending: "Pending",
  held: "Held",
  delivered: "Delivered",
  failed: "Failed",
};

const pick = <K extends string>(options: Record<K, unknown>, value: string | undefined): K | undefined =>
  value !== undefined && Object.hasOwn(options, value) ? (value as K) : undefined;

/** The list's filters as the page's URL carries them; anything unknown is no filter. */
function filtersOf(c: DashContext) {
  const app = c.req.query("app_name")?.trim() || undefined;
  return {
    app_name: app,
    mode: pick(MODES, c.req.query("mode")),
    status: pick(STATUS_CLASSES, c.req.query("status")),
    range: pick(RANGES, c.req.query("range")),
  };
}
type Filters = ReturnType<typeof filtersOf>;

/** The filters as query fields (for the API, the pager and the form). */
const present = (filters: Filters) =>
  Object.fromEntries(Object.entries(filters).filter((e): e is [string, string] => e[1] !== undefined));

function Select<K extends string>(props: {
  name: string;
  label: string;
  options: Record<K, string>;
  value: K | undefined;
  any: string;
}) {
  return (
    <div>
      <label for={`filter-${props.name}`}>{props.label}</label>
      <select id={`filter-${props.name}`} name={props.name}>
        <option value="">{props.any}</option>
        {(Object.keys(props.options) as K[]).map((k) => (
          <option value={k} selected={k === props.value}>
            {props.options[k]}
          </option>
        ))}
      </select>
    </div>
  );
}

function RunRow({ r, pid, names }: { r: RunRecordItem; pid: string; names: CallerNames }) {
  const page = runPath(pid, r.run_id);
  return (
    <tr id={`run-${r.run_id}`}>
      <td data-label="Run" class="run">
        {when(r.created_at)}
        <br />
        <a href={page}>
          <code class="id">{r.run_id}</code>
        </a>
      </td>
      <td data-label="App and request" class="request">
        {r.app_name} <Badge tone={r.mode === "sync" ? "neutral" : "info"}>{r.mode}</Badge>
        <br />
        <code>{`${r.method} /${r.path}`}</code>
      </td>
      <td data-label="Outcome" class="outcome">
        <OutcomeBadge r={r} />
      </td>
      <td data-label="Duration" class="num duration">
        {duration(r.duration_ms)}
        {r.ttfb_ms !== null && (
          <>
            <br />
            <span class="muted">first byte {duration(r.ttfb_ms)}</span>
          </>
        )}
      </td>
      <td data-label="In / out" class="num optional">
        {bytes(r.bytes_in)} / {bytes(r.bytes_out)}
      </td>
      <td data-label="Caller" class="optional">
        <Caller caller={r.caller} names={names} />
      </td>
      <td data-label="Webhook" class={r.webhook ? "webhook" : "webhook none"}>
        {r.webhook ? (
          <a href={`${projectPath(pid, "/webhook-deliveries")}?run_id=${seg(r.run_id)}`}>
            <Badge tone={WEBHOOK_TONE[r.webhook.status]}>{WEBHOOK_LABEL[r.webhook.status]}</Badge>
            {r.webhook.attempts > 1 && <span class="muted"> {r.webhook.attempts} attempts</span>}
          </a>
        ) : (
          <span class="muted">none</span>
        )}
      </td>
    </tr>
  );
}

/**
 * The runs under way, every mode (a synchronous run too, while its caller waits): the list below holds
 * runs once they ended. From the project's usage ledger (no D1 read), with the runs list's app and mode
 * filters.
 */
async function underWay(c: DashContext, pid: string, filters: Filters): Promise<RunUnderWay[]> {
  const query = new URLSearchParams({ limit: String(UNDER_WAY_SHOWN) });
  if (filters.app_name) query.set("app_name", filters.app_name);
  const list = await c.get("api")<RunUnderWayList>("GET", `/projects/${seg(pid)}/runs/under-way?${query}`);
  return list.ok ? list.data.data.filter((r) => !filters.mode || r.mode === filters.mode) : [];
}

function UnderWay({ runs, pid, now }: { runs: RunUnderWay[]; pid: string; now: number }) {
  return (
    <div id="runs-under-way" data-live-part>
      {runs.length > 0 && (
        <div class="card under-way">
          <h2>Under way</h2>
          <ul class="plain">
            {runs.map((r) => (
              <li data-under-way>
                <a href={runPath(pid, r.run_id)}>
                  <code class="id">{r.run_id}</code>
                </a>{" "}
                <span class="nowrap">
                  {r.app_name} <Badge tone={r.mode === "sync" ? "neutral" : "info"}>{r.mode}</Badge>
                </span>{" "}
                <span class="muted">
                  since {when(r.created_at)} ({duration(now - Date.parse(r.created_at))})
                </span>
              </li>
            ))}
          </ul>
        </div>
      )}
    </div>
  );
}

/**
 * The line that says the page follows the project's runs, and where its events are: the script shows
 * it and listens (the dashboard's script, served as /assets/dashboard.js); without script the page is as it was when loaded.
 */
export const LiveStatus = ({ events, text, follow }: { events: string; text: string; follow?: boolean }) => (
  <p id="live-status" class="live muted" data-live={events} data-follow={follow ? "" : undefined} hidden>
    <span class="dot" aria-hidden="true"></span> {text}
  </p>
);

async function runsPage(c: DashContext, project: ProjectItem) {
  const pid = project.project_id;
  const filters = filtersOf(c);
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (filters.app_name) query.set("app_name", filters.app_name);
  if (filters.mode) query.set("mode", filters.mode);
  if (filters.status) query.set("status", filters.status);
  if (filters.range)
    query.set("from", new Date(c.var.scope.deps.now().getTime() - RANGES[filters.range].span).toISOString());
  const cursor = c.req.query("cursor");
  if (cursor) query.set("cursor", cursor);
  const api = c.get("api");
  const [list, apps, pending, names] = await Promise.all([
    api<RunRecordPage>("GET", `/projects/${seg(pid)}/runs?${query}`),
    api<Page<AppItem>>("GET", `/projects/${seg(pid)}/apps?limit=100`),
    // Runs under way are news: only the first page (newest runs) shows and follows them.
    cursor ? [] : underWay(c, pid, filters),
    callerNames(c, pid),
  ]);
  const now = c.var.scope.deps.now().getTime();
  const path = projectPath(pid, "/runs");
  const kept = present(filters);
  const filtered = Object.keys(kept).length > 0;
  const appNames = Object.fromEntries((apps.ok ? apps.data.data : []).map((a) => [a.name, a.name]));
  if (filters.app_name && !appNames[filters.app_name]) appNames[filters.app_name] = filters.app_name;
  const rangeLabels = Object.fromEntries(Object.entries(RANGES).map(([k, v]) => [k, `Last ${v.label}`])) as Record<
    Range,
    string
  >;
  return renderPage(
    c,
    { title: "Runs", projectId: pid, tab: "runs", status: list.ok ? 200 : list.problem.status === 404 ? 404 : 400 },
    <>
      <ProjectHeading project={project} title="Runs" />
      <p class="muted">
        Every run of the project, synchronous and async, newest first: those under way, then each once it has ended (no
        bodies are kept). An async run's full state and result stay at its <code>status_url</code>. Runs are kept 7
        days.
      </p>
      {!cursor && (
        <LiveStatus
          events={projectPath(pid, "/runs/events")}
          text="Live: runs appear as they start and end, without a reload."
        />
      )}
      <UnderWay runs={pending} pid={pid} now={now} />
      <form method="get" action={path} class="filter runs" aria-label="Filter runs">
        <Select name="app_name" label="App" options={appNames} value={filters.app_name} any="All apps" />
        <Select name="mode" label="Mode" options={MODES} value={filters.mode} any="Every mode" />
        <Select name="status" label="Status" options={STATUS_CLASSES} value={filters.status} any="Every status" />
        <Select name="range" label="Time" options={rangeLabels} value={filters.range} any="Any time (7 days kept)" />
        <FilterActions path={path} filtered={filtered} />
      </form>
      <div id="runs-list" data-live-part>
        {!list.ok ? (
          <ProblemMessage problem={list.problem} action="Loading runs" />
        ) : list.data.data.length === 0 ? (
          filtered ? (
            <p>No runs match these filters.</p>
          ) : (
            <div class="card">
              <p>
                <strong>No runs yet.</strong> Make one with a token from{" "}
                <a href={projectPath(pid, "/api-keys")}>API Keys</a>:
              </p>
              <RunCommand c={c} projectId={pid} appName={Object.keys(appNames)[0]} />
            </div>
          )
        ) : (
          <>
            {list.data.sampled && (
              <p class="alert warning" role="note">
                The project made more runs in this range than its records keep: the list shows a sample of that time's
                runs. The counts on the <a href={projectPath(pid, "/usage")}>Usage</a> page stay exact.
              </p>
            )}
            <DataTable
              caption="Runs"
              columns={[
                "Run",
                "App and request",
                "Outcome",
                "Duration",
                { label: "In / out", optional: true },
                { label: "Caller", optional: true },
                "Webhook",
              ]}
              class="cards runs"
              footer={<Pager path={path} next={list.data.next_cursor} query={kept} />}
            >
              {list.data.data.map((r) => (
                <RunRow r={r} pid={pid} names={names} />
              ))}
            </DataTable>
          </>
        )}
      </div>
    </>,
  );
}

/**
 * The project's runs as server-sent events, for the script of the Runs and run pages: the API's stream
 * (`GET /v2/projects/{project_id}/runs/events`) passed on as it is, as the session's caller, so the
 * API decides who may follow. Registered before a run's page (`…/runs/:run_id`).
 */
async function runEvents(c: DashContext) {
  const pid = c.req.param("project_id") ?? "";
  const response = await c.get("api").stream(`/projects/${seg(pid)}/runs/events`);
  if (!response.ok || !response.body) {
    await response.body?.cancel();
    // Not 200: an EventSource stops for good, as it should for a project it may not follow.
    return c.text(
      "The runs of this project cannot be followed.",
      response.status === 200 ? 502 : (response.status as 403),
    );
  }
  return new Response(response.body, {
    status: 200,
    headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-store" },
  });
}

export function registerRuns(dash: DashRouter) {
  dash.get("/projects/:project_id/runs/events", runEvents);
  dash.get("/projects/:project_id/runs", (c) => withProject(c, (project) => runsPage(c, project)));
}
