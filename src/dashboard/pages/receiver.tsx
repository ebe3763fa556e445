import { type ApiResult, type Page, type Problem, seg } from "../api";
import { can, NotAllowed } from "../access";
import { type DashContext, type DashRouter, filteredDeliveries, formText, projectPath, receiverPage } from "../context";
import { Badge, type BadgeTone, Csrf, DataTable, ProblemMessage, when } from "../components";
import type {
  Delivery,
  ProjectItem,
  Receiver,
  ReceiverDetail,
  ReceiverResumed,
  ReceiverState,
  ReceiverTask,
} from "../api-types";
import { count, duration, percent } from "../format";
import { renderPage } from "../layout";
import { Attempts, ERROR_TEXT, Outcome, STATUS_LABEL, STATUS_TONE } from "./deliveries";
import { RANGES, RangePicker, rangeOf, windowOf } from "../usage-view";
import { withProject } from "./project";

/**
 * A receiver's own page (`…/webhook-receivers/{origin}`): its state and controls (pause, resume or
 * re-enable), its health over a range, recover (a dry-run count first, then the recovery itself), the
 * task a control started followed by a progress bar that updates by itself (the dashboard's script,
 * assets.ts, asks for the task's card, `…/tasks/{task_id}`, one API call each time; without script a
 * Refresh link), and the first page of its held and of its failed deliveries. See
 * docs/webhook-receivers.md "In the dashboard".
 */

type Health = { tone: BadgeTone; label: string };

/** A receiver's state in one word: every delivery arrived, some failed, or most failed. */
export function healthOf(r: Receiver): Health {
  if (r.state === "disabled") return { tone: "bad", label: "Disabled" };
  if (r.state === "paused") return { tone: "warn", label: "Paused" };
  const total = r.delivered + r.failed;
  if (r.failed === 0) return { tone: "ok", label: "Healthy" };
  if (r.failed * 2 >= total) return { tone: "bad", label: "Failing" };
  return { tone: "warn", label: "Some failures" };
}

/** Deliveries of each kind shown on the page; the rest are a link away, on the deliveries page. */
const LIST_SIZE = 10;

export const receiverApi = (pid: string, origin: string, rest = "") =>
  `/projects/${seg(pid)}/webhook-receivers/${encodeURIComponent(origin)}${rest}`;

const TASK_ID = /^wrt_[0-9a-z]{30}$/;
const running = (task: ReceiverTask) => task.status === "counting" || task.status === "sending";

/**
 * A time from a `datetime-local` field (`2026-11-27T16:00`, read as UTC, as the page says) as RFC 3339;
 * anything else as typed, for the API to say what is wrong with it.
 */
export function utcTime(value: string): string {
  const v = value.trim();
  const local = /^(\d{4}-\d\d-\d\dT\d\d:\d\d)(:\d\d(?:\.\d{1,3})?)?$/.exec(v);
  return local ? `${local[1]}${local[2] ?? ":00"}Z` : v;
}

/** An RFC 3339 time as a `datetime-local` field's value (UTC, to the minute, or the second when it has one). */
const fieldTime = (iso: string) => iso.replace(/(:00)?\.\d+Z$|(:00)?Z$/, "");

/** The controls' form: one action on the receiver, back to its page (or to the list, `back=list`). */
function ControlForm(props: {
  c: DashContext;
  pid: string;
  origin: string;
  action: string;
  label: string;
  fields?: Record<string, string>;
  tone?: "secondary" | "danger" | "primary";
  back?: string;
}) {
  return (
    <form method="post" action={projectPath(props.pid, "/webhook-receivers/control")} class="inline">
      <Csrf token={props.c.get("csrf")} />
      <input type="hidden" name="origin" value={props.origin} />
      <input type="hidden" name="action" value={props.action} />
      {props.back && <input type="hidden" name="back" value={props.back} />}
      {Object.entries(props.fields ?? {}).map(([k, v]) => (
        <input type="hidden" name={k} value={v} />
      ))}
      {/* In the list, a row's button names its receiver: the rows' buttons are otherwise alike. */}
      <button
        type="submit"
        class={props.tone === "primary" ? undefined : (props.tone ?? "secondary")}
        aria-label={props.back === "list" ? `${props.label} ${props.origin}` : undefined}
      >
        {props.label}
      </button>
    </form>
  );
}

/** Pause when active; Resume when paused; Re-enable when disabled. */
export function StateControl(props: { c: DashContext; pid: string; origin: string; state: string; back?: string }) {
  const { state } = props;
  return state === "active" ? (
    <ControlForm {...props} action="pause" label="Pause" />
  ) : (
    <ControlForm {...props} action="resume" label={state === "disabled" ? "Re-enable" : "Resume"} tone="primary" />
  );
}

/** A task's card: a dry run's count (with the button that starts the recovery), or a progress bar. */
export function TaskCard({ c, pid, task, range }: { c: DashContext; pid: string; task: ReceiverTask; range: string }) {
  const live = running(task);
  const self = receiverPage(pid, task.origin, { task: task.task_id, range });
  const refresh = live && (
    <a href={self} class="refresh">
      Refresh
    </a>
  );
  const cancel = live && can(c, "deliveries:write") && (
    <ControlForm
      c={c}
      pid={pid}
      origin={task.origin}
      action="cancel"
      label={task.dry_run ? "Cancel the count" : "Cancel"}
      fields={{ task: task.task_id, range }}
      tone="danger"
    />
  );
  const span = (
    <>
      made from {when(task.since)} to {when(task.until)}
    </>
  );
  const lost = task.expired + task.unsendable;
  if (task.dry_run) {
    return (
      <div class="card" id="task-card" data-task={task.task_id} data-running={live ? "" : undefined}>
        <h2>Count of failed deliveries</h2>
        {live ? (
          <p id="task-summary">
            Counting the failed deliveries {span}… {refresh}
          </p>
        ) : task.status === "cancelled" ? (
          <p id="task-summary">The count was cancelled.</p>
        ) : (
          <p id="task-summary">
            <strong>{count(task.counted)}</strong> failed {task.counted === 1 ? "delivery" : "deliveries"} {span} can be
            sent again
            {lost > 0 && <span class="muted"> ({count(lost)} cannot: past the body retention or never stored)</span>}.
          </p>
        )}
        {!live && task.status === "finished" && task.counted > 0 && can(c, "deliveries:write") && (
          <ControlForm
            c={c}
            pid={pid}
            origin={task.origin}
            action="recover"
            label={`Recover ${count(task.counted)} ${task.counted === 1 ? "delivery" : "deliveries"}`}
            fields={{ since: task.since ?? "", until: task.until ?? "", range }}
            tone="primary"
          />
        )}
        {cancel}
      </div>
    );
  }
  const total = Math.max(task.counted, task.sent);
  const settled = task.delivered + task.failed;
  const what = task.kind === "recover" ? "Recovery" : "Sending what was held";
  const counting = task.status === "counting";
  return (
    <div class="card" id="task-card" data-task={task.task_id} data-running={live ? "" : undefined}>
      <h2>{what}</h2>
      <p id="task-summary">
        {counting ? (
          <>Counting the failed deliveries {span}…</>
        ) : (
          <>
            <strong>
              {count(task.delivered)} of {count(total)} delivered
            </strong>
            , {count(task.failed)} failed again, {count(task.pending)} on their way
            {task.status === "finished" && <> · finished {when(task.finished_at)}</>}
            {task.status === "cancelled" && <> · cancelled: {count(Math.max(total - task.sent, 0))} not sent</>}
            {task.status === "sending" && " · sending"}.
          </>
        )}{" "}
        {refresh}
      </p>
      {counting ? (
        <progress aria-label={`${what}: counting`}></progress>
      ) : (
        <progress max={Math.max(total, 1)} value={settled} aria-label={`${what}: ${settled} of ${total} settled`}>
          {count(settled)} of {count(total)}
        </progress>
      )}
      {task.kind === "recover" && lost > 0 && (
        <p class="muted">
          {count(lost)} failed deliveries of the window cannot be sent: past the body retention or never stored.
        </p>
      )}
      {cancel}
    </div>
  );
}

/** The task a control started (`?task=…`), read through the API (it needs `deliveries:write`). */
async function taskOf(c: DashContext, pid: string, origin: string, taskId: string | undefined) {
  if (!taskId || !TASK_ID.test(taskId) || !can(c, "deliveries:write")) return null;
  return c.get("api")<ReceiverTask>("GET", receiverApi(pid, origin, `/tasks/${seg(taskId)}`));
}

function DeliveryList(props: {
  pid: string;
  origin: string;
  status: "held" | "failed";
  list: ApiResult<Page<Delivery>>;
}) {
  const { pid, origin, status, list } = props;
  const title = status === "held" ? "Held deliveries" : "Failed deliveries";
  const all = filteredDeliveries(pid, origin, status);
  return (
    <section id={`${status}-deliveries`} data-poll-part aria-labelledby={`${status}-title`}>
      <h2 id={`${status}-title`}>{title}</h2>
      {status === "failed" && (
        <p class="muted">
          A failed delivery stays failed once it is recovered: its resend is a delivery of its own, of the same message
          (the figures count it under Recovered).
        </p>
      )}
      {!list.ok ? (
        <ProblemMessage problem={list.problem} action={`Loading ${title.toLowerCase()}`} />
      ) : list.data.data.length === 0 ? (
        <p class="muted">
          {status === "held"
            ? "None: nothing is waiting for this receiver."
            : "None kept: every delivery to this receiver that failed was delivered since, or is past the records' 7 days."}
        </p>
      ) : (
        <>
          <DataTable
            caption={`${title} to ${origin}, newest first`}
            columns={["Delivery", "Status", "Attempts", "Last outcome"]}
            class="cards"
          >
            {list.data.data.map((d) => (
              <tr id={`delivery-${d.delivery_id}`}>
                <td data-label="Delivery">
                  <code class="id">{d.delivery_id}</code>
                  <br />
                  <span class="muted">
                    run{" "}
                    <a href={projectPath(pid, `/webhook-deliveries?run_id=${seg(d.run_id)}`)}>
                      <code class="id">{d.run_id}</code>
                    </a>
                    , {when(d.created_at)}
                  </span>
                </td>
                <td data-label="Status">
                  <Badge tone={STATUS_TONE[d.status]}>{STATUS_LABEL[d.status]}</Badge>
                </td>
                <td data-label="Attempts">
                  <Attempts attempts={d.attempts} />
                </td>
                <td data-label="Last outcome">
                  <Outcome code={d.last_status_code} error={d.last_error} />
                </td>
              </tr>
            ))}
          </DataTable>
          <p>
            <a href={all}>
              {list.data.next_cursor
                ? `All ${status} deliveries to ${origin} →`
                : `These ${status} deliveries on the deliveries page →`}
            </a>
          </p>
        </>
      )}
    </section>
  );
}

/** The receiver's figures over the page's range. */
function Figures({ r, during }: { r: ReceiverDetail; during: string }) {
  const stat = (label: string, value: string, note?: string) => (
    <div class="stat">
      <dt>{label}</dt>
      <dd>
        {value}
        {note && <span class="muted">{note}</span>}
      </dd>
    </div>
  );
  return (
    <section id="receiver-figures" data-poll-part aria-labelledby="figures-title">
      <h2 id="figures-title">Deliveries {during}</h2>
      <dl class="stats">
        {stat("Delivered", count(r.delivered))}
        {stat("Failed", count(r.failed), "not delivered since")}
        {stat("Recovered", count(r.recovered), "failed, delivered later")}
        {stat("Held", count(r.held))}
        {stat("Pending", count(r.pending))}
        {stat("Retried", percent(r.retried_share))}
        {stat("Run → received", duration(r.p95_run_to_received_ms), "p95")}
        {stat("Concurrency", count(r.concurrency), r.concurrency === 1 ? "ordered" : "requests at once")}
      </dl>
      <p>
        Last failure:{" "}
        {r.last_failure ? (
          <>
            {ERROR_TEXT[r.last_failure.reason] ? (
              <>
                <code>{r.last_failure.reason}</code> <span class="muted">({ERROR_TEXT[r.last_failure.reason]})</span>
              </>
            ) : (
              r.last_failure.reason
            )}
            , {when(r.last_failure.at)}
          </>
        ) : (
          <span class="muted">none</span>
        )}
      </p>
    </section>
  );
}

/** The recovery's form: the window (the page's range by default, read as UTC) and the dry-run count. */
function RecoverForm({
  c,
  pid,
  origin,
  since,
  range,
}: {
  c: DashContext;
  pid: string;
  origin: string;
  since: string;
  range: string;
}) {
  return (
    <form
      method="post"
      action={projectPath(pid, "/webhook-receivers/control")}
      class="filter"
      aria-labelledby="recover-title"
    >
      <Csrf token={c.get("csrf")} />
      <input type="hidden" name="origin" value={origin} />
      <input type="hidden" name="action" value="count" />
      <input type="hidden" name="range" value={range} />
      <div>
        <label for="recover-since">Since (UTC)</label>
        <input id="recover-since" name="since" type="datetime-local" step="1" value={fieldTime(since)} required />
      </div>
      <div>
        <label for="recover-until">Until (UTC)</label>
        <input id="recover-until" name="until" type="datetime-local" step="1" aria-describedby="recover-until-hint" />
        <p class="hint" id="recover-until-hint">
          Empty: now.
        </p>
      </div>
      <div class="actions">
        <button type="submit">Count failed deliveries</button>
      </div>
    </form>
  );
}

async function receiverView(c: DashContext, project: ProjectItem) {
  const pid = project.project_id;
  const origin = c.req.param("origin") ?? "";
  // Seven days by default, as the Receivers page: the deliveries' records are kept that long.
  const range = rangeOf(c.req.query("range"), "7d" as const);
  const window = windowOf(range, c.var.scope.deps.now());
  const api = c.get("api");
  const receiver = await api<ReceiverDetail>(
    "GET",
    `${receiverApi(pid, origin)}?${new URLSearchParams({ from: window.from, to: window.to })}`,
  );
  const list = projectPath(pid, "/webhook-receivers");
  if (!receiver.ok)
    return renderPage(
      c,
      {
        title: "Receiver not found",
        projectId: pid,
        tab: "webhook-receivers",
        status: receiver.problem.status === 404 ? 404 : 400,
      },
      <>
        <h1>
          Receiver not found <span class="muted">· {project.name}</span>
        </h1>
        <ProblemMessage problem={receiver.problem} />
        <p>
          <a href={list}>See all receivers</a>
        </p>
      </>,
    );
  const r = receiver.data;
  const deliveries = (status: "held" | "failed") =>
    api<Page<Delivery>>(
      "GET",
      `/projects/${seg(pid)}/webhook-deliveries?${new URLSearchParams({ origin: r.origin, status, limit: String(LIST_SIZE) })}`,
    );
  const [held, failed, task] = await Promise.all([
    deliveries("held"),
    deliveries("failed"),
    // The task the control started, or else the one under way (so that coming back to the page still follows it).
    taskOf(c, pid, r.origin, c.req.query("task") ?? r.running_task_id ?? undefined),
  ]);
  const health = healthOf(r);
  const writable = can(c, "deliveries:write");
  return renderPage(
    c,
    { title: `Receiver ${r.origin}`, projectId: pid, tab: "webhook-receivers" },
    <>
      <p class="crumbs">
        <a href={list}>Receivers</a> /
      </p>
      <h1>
        Receiver <code>{r.origin}</code> <span class="muted">· {project.name}</span>
      </h1>
      <section id="receiver-state" class="card" data-poll-part aria-labelledby="state-title">
        <h2 id="state-title">State</h2>
        <p>
          <Badge tone={health.tone}>{health.label}</Badge>{" "}
          {r.state === "active" ? (
            "Active: its deliveries are sent as they come."
          ) : (
            <>
              {r.state === "paused" ? "Paused" : "Disabled"}
              {r.state_cause && r.state_cause !== r.state ? `: ${r.state_cause}` : ""}
              {r.state_changed_at && <> (since {when(r.state_changed_at)})</>}. Its new deliveries are held until it is{" "}
              {r.state === "paused" ? "resumed" : "re-enabled"}.
            </>
          )}
        </p>
        {writable ? (
          <StateControl c={c} pid={pid} origin={r.origin} state={r.state} />
        ) : (
          <NotAllowed c={c} doing="pausing, resuming or recovering a receiver's deliveries" />
        )}
      </section>
      <RangePicker c={c} current={range} />
      <Figures r={r} during={`in the last ${RANGES[range].label}`} />
      {task && !task.ok && <ProblemMessage problem={task.problem} action="Loading the task" />}
      <section id="task">{task?.ok && <TaskCard c={c} pid={pid} task={task.data} range={range} />}</section>
      {writable && (
        <section class="card" aria-labelledby="recover-title">
          <h2 id="recover-title">Recover failed deliveries</h2>
          <p class="muted">
            Sends again, oldest first and at the receiver's pace, every delivery made in the window whose last outcome
            was a failure and that was not delivered since. Count them first; nothing is sent until you recover them.
          </p>
          <RecoverForm c={c} pid={pid} origin={r.origin} since={window.from} range={range} />
        </section>
      )}
      <DeliveryList pid={pid} origin={r.origin} status="held" list={held} />
      <DeliveryList pid={pid} origin={r.origin} status="failed" list={failed} />
    </>,
  );
}

/** A refused control: the API's problem, on a page that leads back. */
function refused(c: DashContext, project: ProjectItem, origin: string, problem: Problem) {
  const pid = project.project_id;
  return renderPage(
    c,
    {
      title: "Receiver",
      projectId: pid,
      tab: "webhook-receivers",
      status: problem.status === 404 ? 404 : problem.status === 409 ? 409 : 400,
    },
    <>
      <h1>
        Receiver <code>{origin}</code> <span class="muted">· {project.name}</span>
      </h1>
      <ProblemMessage problem={problem} action="The receiver was not changed" />
      <p>
        <a href={receiverPage(pid, origin)}>Back to the receiver</a> ·{" "}
        <a href={projectPath(pid, "/webhook-receivers")}>All receivers</a>
      </p>
    </>,
  );
}

export function registerReceiver(dash: DashRouter) {
  dash.get("/projects/:project_id/webhook-receivers/:origin", (c) =>
    withProject(c, (project) => receiverView(c, project)),
  );
  // The followed task's card alone, for the dashboard's script (assets.ts): one API call each time it asks.
  dash.get("/projects/:project_id/webhook-receivers/:origin/tasks/:task_id", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const origin = c.req.param("origin");
      const range = rangeOf(c.req.query("range"), "7d" as const);
      const task = await taskOf(c, pid, origin, c.req.param("task_id"));
      if (!task?.ok)
        return c.json({ running: false, html: null }, task ? (task.problem.status === 404 ? 404 : 400) : 404);
      const html = await (<TaskCard c={c} pid={pid} task={task.data} range={range} />).toString();
      return c.json({ running: running(task.data), html }, 200);
    }),
  );
  dash.post("/projects/:project_id/webhook-receivers/control", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const form = await c.req.parseBody();
      const origin = formText(form, "origin");
      const action = formText(form, "action");
      const range = rangeOf(formText(form, "range") || undefined, "7d" as const);
      const api = c.get("api");
      const toList = formText(form, "back") === "list";
      const back = (task?: string) =>
        c.redirect(
          toList && !task
            ? projectPath(pid, "/webhook-receivers")
            : receiverPage(pid, origin, { ...(task ? { task } : {}), ...(range !== "7d" ? { range } : {}) }),
          303,
        );
      if (action === "pause" || action === "resume") {
        const answer = await api<ReceiverState | ReceiverResumed>("POST", receiverApi(pid, origin, `/${action}`));
        if (!answer.ok) return refused(c, project, origin, answer.problem);
        // From the list, back to the list; from the receiver's page, the release of what was held is followed there.
        return back(toList || !("task" in answer.data) ? undefined : answer.data.task.task_id);
      }
      if (action === "count" || action === "recover") {
        const until = formText(form, "until").trim();
        const answer = await api<ReceiverTask>("POST", receiverApi(pid, origin, "/recover"), {
          since: utcTime(formText(form, "since")),
          ...(until ? { until: utcTime(until) } : {}),
          dry_run: action === "count",
        });
        if (!answer.ok) return refused(c, project, origin, answer.problem);
        return back(answer.data.task_id);
      }
      if (action === "cancel") {
        const taskId = formText(form, "task");
        const answer = await api<ReceiverTask>(
          "DELETE",
          receiverApi(pid, origin, `/tasks/${seg(TASK_ID.test(taskId) ? taskId : "wrt_unknown")}`),
        );
        if (!answer.ok) return refused(c, project, origin, answer.problem);
        return back(answer.data.task_id);
      }
      return back();
    }),
  );
}
