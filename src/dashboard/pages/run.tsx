import type { z } from "@hono/zod-openapi";
import type { AsyncRunSchema } from "../../runs/async/routes";
import { type ApiResult, type Page, seg } from "../api";
import { can } from "../access";
import { Caller, callerNames } from "../callers";
import { Badge, DataTable, ProblemMessage, when } from "../components";
import { type DashContext, type DashRouter, projectPath } from "../context";
import { bytes, duration } from "../format";
import { renderPage } from "../layout";
import { endingText, OutcomeBadge } from "../run-outcome";
import type { Delivery, ProjectItem, RunRecordItem, RunUnderWay } from "../api-types";
import { LiveStatus } from "./runs";
import { Attempts, Outcome, STATUS_LABEL, STATUS_TONE } from "./deliveries";
import { ProjectHeading, withProject } from "./project";

/** An async or handed-over run's own state and stored result (`GET /v2/projects/{project_id}/async-runs/{run_id}`). */
type AsyncRunItem = z.infer<typeof AsyncRunSchema>;

/** The most of a stored result the page shows; the rest is a link away (the status URL). */
const RESULT_SHOWN_CHARS = 20_000;

export interface Moment {
  what: string;
  at: number;
  note?: string;
}

/**
 * A run's timeline: accepted, called, answered (headers), first byte, handed over, ended, as far as
 * the record (its moments) and an async or handed-over run's state (its times) tell them; each once, in
 * order. A record from before the moments were kept still gives its end (and a stream's first byte).
 */
export function timelineOf(
  record: RunRecordItem | null,
  run: AsyncRunItem | null,
  underWay: Pick<RunUnderWay, "created_at"> | null = null,
): Moment[] {
  const acceptedAt = Date.parse(record?.created_at ?? run?.created_at ?? underWay?.created_at ?? "");
  if (Number.isNaN(acceptedAt)) return [];
  const times = record?.times;
  const after = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : acceptedAt + ms);
  const at = (iso: string | null | undefined) => (iso ? Date.parse(iso) : null);
  const moments: [string, number | null, string?][] = [
    ["Accepted", acceptedAt, "the gateway admitted the run"],
    ["App called", after(times?.called_ms) ?? at(run?.started_at), "the request to the app was sent"],
    ["App answered", after(times?.answered_ms), "the app's response headers came"],
    ["First byte", after(times?.first_byte_ms), "the first byte of the answer reached the caller"],
    [
      "Handed over",
      after(times?.handed_over_ms) ?? at(run?.handed_over_at),
      "the caller stopped waiting; the run went on",
    ],
    ["Ended", after(times?.ended_ms) ?? at(run?.finished_at), undefined],
  ];
  // A waited run is handed over before its app answers: the moments come in the order they happened
  // (a stable sort keeps the order above for moments of the same millisecond).
  return moments
    .filter((m): m is [string, number, string?] => m[1] !== null)
    .sort((a, b) => a[1] - b[1])
    .map(([what, when, note]) => ({ what, at: when, ...(note ? { note } : {}) }));
}

/**
 * The timeline as one bar, each stretch between two moments in proportion to its length (a run that
 * waited 9 s for its app and streamed for 1 s looks it), named by the moment that ends it; its legend
 * says in words what each colour is (colours take turns: a run has up to five stretches).
 */
function TimelineBar({ moments }: { moments: Moment[] }) {
  const start = moments[0]!.at;
  const total = moments.at(-1)!.at - start;
  if (moments.length < 2 || total <= 0) return null;
  const W = 480;
  const x = (at: number) => Number((((at - start) / total) * W).toFixed(2));
  const stretches = moments.slice(1).map((m, i) => ({
    from: moments[i]!,
    to: m,
    tone: `s${i % 3}`,
    label: `${moments[i]!.what} → ${m.what}: ${duration(m.at - moments[i]!.at)}`,
  }));
  return (
    <figure class="timeline-bar">
      <svg
        class="timeline-bar"
        viewBox={`0 0 ${W} 14`}
        role="img"
        aria-label={`From acceptance to end: ${duration(total)}`}
      >
        {stretches.map((s) => (
          <rect
            class={`stretch ${s.tone}`}
            x={x(s.from.at)}
            y="2"
            width={Math.max(x(s.to.at) - x(s.from.at), 1)}
            height="10"
          >
            <title>{s.label}</title>
          </rect>
        ))}
      </svg>
      <figcaption>
        <ul class="legend">
          {stretches.map((s) => (
            <li>
              <span class={`swatch stretch-${s.tone}`} aria-hidden="true"></span>
              {s.label}
            </li>
          ))}
        </ul>
      </figcaption>
    </figure>
  );
}

function Timeline({ moments, underWaySince }: { moments: Moment[]; underWaySince?: number }) {
  if (moments.length === 0) return <p class="muted">No moments are known for this run.</p>;
  const start = moments[0]!.at;
  return (
    <>
      <TimelineBar moments={moments} />
      <ol class="timeline">
        {moments.map((m) => (
          <li>
            <strong>{m.what}</strong> <span class="num">+{duration(m.at - start)}</span>
            <br />
            <span class="muted">
              {when(new Date(m.at).toISOString())}
              {m.note && ` · ${m.note}`}
            </span>
          </li>
        ))}
        {underWaySince !== undefined && (
          <li class="now">
            <strong>Under way</strong> <span class="num">+{duration(underWaySince - start)}</span>
            <br />
            <span class="muted">when this page was made; the rest of the timeline comes with its end</span>
          </li>
        )}
      </ol>
    </>
  );
}

/** What is known of a run under way: how it was asked, by whom, since when. */
function UnderWayFacts({ u, names }: { u: RunUnderWay; names: Awaited<ReturnType<typeof callerNames>> }) {
  return (
    <dl class="facts">
      <dt>Outcome</dt>
      <dd>
        <Badge tone="info">Running</Badge>
        <br />
        <span class="muted">under way: its outcome, duration and bytes come with its end</span>
      </dd>
      <dt>App and request</dt>
      <dd>
        {u.app_name} <code>{`${u.method} /${u.path}`}</code>
      </dd>
      <dt>Mode</dt>
      <dd>{u.mode}</dd>
      <dt>Caller</dt>
      <dd>
        <Caller caller={u.caller} names={names} />
      </dd>
      <dt>Request id</dt>
      <dd>
        <code>{u.request_id}</code>
      </dd>
      {u.status_url && (
        <>
          <dt>Status URL</dt>
          <dd>
            <code>{u.status_url}</code>
          </dd>
        </>
      )}
    </dl>
  );
}

function Facts({ r, names }: { r: RunRecordItem; names: Awaited<ReturnType<typeof callerNames>> }) {
  const { ending } = r;
  return (
    <dl class="facts">
      <dt>Outcome</dt>
      <dd>
        <OutcomeBadge r={r} />
        {ending !== "hung_up" && (
          <>
            <br />
            <span class="muted">{endingText(ending)}</span>
          </>
        )}
      </dd>
      <dt>App and request</dt>
      <dd>
        {r.app_name} <code>{`${r.method} /${r.path}`}</code>
      </dd>
      <dt>Mode</dt>
      <dd>
        {r.mode}
        {r.handed_over && " (handed over)"}
      </dd>
      <dt>Duration</dt>
      <dd>
        {duration(r.duration_ms)}
        {r.ttfb_ms !== null && <span class="muted">, first byte after {duration(r.ttfb_ms)}</span>}
      </dd>
      <dt>Bytes in / out</dt>
      <dd>
        {bytes(r.bytes_in)} / {bytes(r.bytes_out)}
      </dd>
      <dt>Caller</dt>
      <dd>
        <Caller caller={r.caller} names={names} />
      </dd>
      <dt>Request id</dt>
      <dd>
        <code>{r.request_id}</code>
      </dd>
      {r.status_url && (
        <>
          <dt>Status URL</dt>
          <dd>
            <code>{r.status_url}</code>
          </dd>
        </>
      )}
    </dl>
  );
}

function Result({ run }: { run: AsyncRunItem }) {
  const text = run.result === null || run.result === undefined ? null : JSON.stringify(run.result, null, 2);
  return (
    <>
      <dl class="facts">
        <dt>State</dt>
        <dd>
          <Badge tone={run.status === "succeeded" ? "ok" : run.status === "failed" ? "bad" : "info"}>
            {run.status}
          </Badge>
          {run.status_code !== null && <span class="muted"> answered {run.status_code}</span>}
        </dd>
        {run.error && (
          <>
            <dt>Error</dt>
            <dd>
              <code>{run.error.code}</code> <span class="muted">{run.error.message}</span>
            </dd>
          </>
        )}
      </dl>
      {text === null ? (
        <p class="muted">
          {run.status === "queued" || run.status === "running"
            ? "No result yet: it is stored here once the run ends."
            : "No result is stored."}
        </p>
      ) : (
        <>
          <pre>
            <code>{text.length > RESULT_SHOWN_CHARS ? `${text.slice(0, RESULT_SHOWN_CHARS)}\n…` : text}</code>
          </pre>
          {text.length > RESULT_SHOWN_CHARS && (
            <p class="muted">
              The first {RESULT_SHOWN_CHARS.toLocaleString("en-US")} characters; the whole result is at its status URL.
            </p>
          )}
        </>
      )}
    </>
  );
}

function Deliveries({ list, pid, runId }: { list: ApiResult<Page<Delivery>> | null; pid: string; runId: string }) {
  if (list === null) return <p class="muted">Your role does not show webhook deliveries.</p>;
  if (!list.ok) return <ProblemMessage problem={list.problem} action="Loading the run's deliveries" />;
  if (list.data.data.length === 0) return <p class="muted">No webhook was asked for this run.</p>;
  return (
    <>
      <DataTable caption="Webhook deliveries of the run" columns={["Endpoint", "Status", "Attempts", "Last outcome"]}>
        {list.data.data.map((d) => (
          <tr>
            <td>
              <code>{d.endpoint}</code>
              <br />
              <span class="muted">
                id <code>{d.delivery_id}</code>
              </span>
            </td>
            <td>
              <Badge tone={STATUS_TONE[d.status]}>{STATUS_LABEL[d.status]}</Badge>
            </td>
            <td>
              <Attempts attempts={d.attempts} />
            </td>
            <td>
              <Outcome code={d.last_status_code} error={d.last_error} />
            </td>
          </tr>
        ))}
      </DataTable>
      <p>
        <a href={`${projectPath(pid, "/webhook-deliveries")}?run_id=${seg(runId)}`}>
          These deliveries on the Webhook deliveries page (resend from there)
        </a>
      </p>
    </>
  );
}

async function runPage(c: DashContext, project: ProjectItem) {
  const pid = project.project_id;
  const runId = c.req.param("run_id") ?? "";
  const api = c.get("api");
  const [record, underWay, run, deliveries, names] = await Promise.all([
    api<RunRecordItem>("GET", `/projects/${seg(pid)}/runs/${seg(runId)}`),
    // Asked beside the record (one ledger call each, no D1): whichever answers is the run's state.
    api<{ data: RunUnderWay[] }>("GET", `/projects/${seg(pid)}/runs/under-way?run_id=${seg(runId)}&limit=1`),
    can(c, "runs:invoke") ? api<AsyncRunItem>("GET", `/projects/${seg(pid)}/async-runs/${seg(runId)}`) : null,
    can(c, "deliveries:read")
      ? api<Page<Delivery>>("GET", `/projects/${seg(pid)}/webhook-deliveries?run_id=${seg(runId)}&limit=20`)
      : null,
    callerNames(c, pid),
  ]);
  const r = record.ok ? record.data : null;
  const a = run?.ok ? run.data : null;
  // Not on record yet: under way, perhaps (a synchronous run has no other state until its end).
  const u = r === null && underWay.ok ? (underWay.data.data[0] ?? null) : null;
  const found = r !== null || a !== null || u !== null;
  // The page follows the run until its record is made (its end), then stands still.
  const live = r === null && (u !== null || (a !== null && (a.status === "queued" || a.status === "running")));
  const now = c.var.scope.deps.now().getTime();
  // A problem other than "no such run" (a bad id, a refused read) is shown as it is.
  const refused = !record.ok && record.problem.status !== 404 ? record.problem : null;
  return renderPage(
    c,
    {
      title: `Run ${runId}`,
      projectId: pid,
      tab: "runs",
      status: found ? 200 : refused ? (refused.status === 403 ? 403 : 400) : 404,
    },
    <>
      <p>
        <a href={projectPath(pid, "/runs")}>← Runs</a>
      </p>
      <ProjectHeading project={project} title="Run" />
      <p>
        <code class="id">{runId}</code>
      </p>
      {live && (
        <LiveStatus
          events={projectPath(pid, "/runs/events")}
          text="Live: this page follows the run to its end, without a reload."
          follow
        />
      )}
      <div id="run-live" data-live-part>
        {refused ? (
          <ProblemMessage problem={refused} action="Loading the run" />
        ) : !found ? (
          <div class="card">
            <p>
              <strong>No run with this id in the project.</strong> A run is shown here about a second after its
              admission, and on record once it has ended; records are kept 7 days.
            </p>
          </div>
        ) : (
          <>
            {r ? (
              <Facts r={r} names={names} />
            ) : u && !a ? (
              <UnderWayFacts u={u} names={names} />
            ) : (
              <p class="muted">Not on record yet: a run is recorded once it has ended. Its state so far is below.</p>
            )}
            <h2>Timeline</h2>
            <Timeline moments={timelineOf(r, a, u)} underWaySince={live ? now : undefined} />
            {a && (
              <>
                <h2>Result</h2>
                <Result run={a} />
              </>
            )}
            <h2>Webhook deliveries</h2>
            <Deliveries list={deliveries} pid={pid} runId={runId} />
          </>
        )}
      </div>
    </>,
  );
}

export function registerRun(dash: DashRouter) {
  dash.get("/projects/:project_id/runs/:run_id", (c) => withProject(c, (project) => runPage(c, project)));
}
