import { type Page, type Problem, seg } from "../api";
import type { Attempt, Delivery, ProjectItem } from "../api-types";
import { type DashContext, type DashRouter, projectPath } from "../context";
import {
  Badge,
  type BadgeTone,
  Csrf,
  DataTable,
  Field,
  FilterActions,
  Pager,
  ProblemMessage,
  when,
} from "../components";
import { renderPage } from "../layout";
import { ProjectHeading, withProject } from "./project";

export const STATUS_TONE: Record<Delivery["status"], BadgeTone> = {
  pending: "info",
  held: "warn",
  delivered: "ok",
  failed: "bad",
};
export const STATUS_LABEL: Record<Delivery["status"], string> = {
  pending: "Pending",
  held: "Held",
  delivered: "Delivered",
  failed: "Failed",
};

/** The API's error codes (src/webhooks/routes.ts), in words; an unknown one is shown as it is. */
export const ERROR_TEXT: Record<string, string> = {
  timeout: "no answer in time",
  connection_failed: "could not connect",
  body_missing: "the run's answer was no longer stored",
  body_unavailable: "the run's answer could not be read",
  secret_unreadable: "the signing secret could not be read",
  attempts_exhausted: "gave up after the last attempt",
  enqueue_failed: "could not be queued",
  run_interrupted: "the run was cut short before its answer",
  never_attempted: "never attempted; settled by the sweeper",
  stalled: "stopped before its last attempt; settled by the sweeper",
  dead_lettered: "the queue gave up on it",
  outcome_not_recorded: "the last attempt's outcome was lost",
  receiver_paused: "held: its receiver is paused",
  receiver_disabled: "held: its receiver is disabled",
  held_past_retention: "held longer than its body is kept",
  aborted_by_receiver: "the receiver answered webhook-delivery: abort-message",
};

const PAGE_SIZE = 20;

export function Outcome({ code, error }: { code: number | null; error: string | null }) {
  if (code !== null) return <>HTTP {code}</>;
  if (error) {
    return (
      <>
        <code>{error}</code>
        {ERROR_TEXT[error] && <span class="muted"> ({ERROR_TEXT[error]})</span>}
      </>
    );
  }
  return <span class="muted">not yet</span>;
}

export function Attempts({ attempts }: { attempts: Attempt[] }) {
  if (attempts.length === 0) return <span class="muted">none yet</span>;
  return (
    <ol class="attempts">
      {attempts.map((a) => (
        <li>
          #{a.attempt} {when(a.at)}: <Outcome code={a.status_code} error={a.error} />, {a.duration_ms} ms
        </li>
      ))}
    </ol>
  );
}

/** After a Resend: the new delivery's id, or why there is none. */
interface ResendState {
  resent?: string;
  problem?: Problem;
}

async function deliveriesPage(c: DashContext, project: ProjectItem, state: ResendState = {}) {
  const pid = project.project_id;
  const runId = (c.req.query("run_id") ?? "").trim();
  const status = c.req.query("status") ?? "";
  const statusFilter = Object.hasOwn(STATUS_LABEL, status) ? status : "";
  const origin = (c.req.query("origin") ?? "").trim();
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (runId) query.set("run_id", runId);
  if (statusFilter) query.set("status", statusFilter);
  if (origin) query.set("origin", origin);
  const filters = Object.fromEntries(
    [
      ["run_id", runId],
      ["status", statusFilter],
      ["origin", origin],
    ].filter(([, v]) => v),
  );
  const filtered = Object.keys(filters).length > 0;
  const cursor = c.req.query("cursor");
  if (cursor) query.set("cursor", cursor);
  const list = await c.get("api")<Page<Delivery>>("GET", `/projects/${seg(pid)}/webhook-deliveries?${query}`);
  const path = projectPath(pid, "/webhook-deliveries");
  const runError = !list.ok ? list.problem.fields.run_id : undefined;
  const originError = !list.ok ? list.problem.fields.origin : undefined;
  return renderPage(
    c,
    {
      title: "Webhook deliveries",
      projectId: pid,
      tab: "webhook-deliveries",
      status: list.ok ? 200 : list.problem.status === 404 ? 404 : 400,
    },
    <>
      <ProjectHeading project={project} title="Webhook deliveries" />
      <p class="muted">
        Runs called with <code>?webhookEndpoint=</code> send their answer there. Newest first; each delivery is tried up
        to 3 times.
      </p>
      {state.resent && (
        <div class="alert success" role="status">
          Resent as <code>{state.resent}</code>.
        </div>
      )}
      {state.problem && <ProblemMessage problem={state.problem} action="Resending" />}
      <form method="get" action={path} class="filter" role="search" aria-label="Filter deliveries">
        <Field
          label="Run id"
          name="run_id"
          value={runId}
          maxlength={64}
          error={runError}
          hint="Only the deliveries of this run (the X-Run-Id of its answer)."
        />
        <label>
          Status{" "}
          <select name="status">
            <option value="" selected={!statusFilter}>
              Any
            </option>
            {Object.entries(STATUS_LABEL).map(([value, label]) => (
              <option value={value} selected={value === statusFilter}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <Field
          label="Receiver"
          name="origin"
          value={origin}
          maxlength={300}
          error={originError}
          hint="Only the deliveries to this origin, e.g. https://hooks.example.com."
        />
        <FilterActions path={path} filtered={filtered} />
      </form>
      {!list.ok ? (
        <ProblemMessage problem={list.problem} action="Loading deliveries" />
      ) : list.data.data.length === 0 ? (
        <p>
          {runId && !statusFilter && !origin
            ? "No deliveries for this run."
            : filtered
              ? "No deliveries match these filters."
              : "No webhook deliveries yet."}
        </p>
      ) : (
        <DataTable
          caption={<>Webhook deliveries{runId ? ` of run ${runId}` : ""}</>}
          columns={["Delivery", "Status", "Attempts", "Last outcome"]}
          class="cards"
          footer={<Pager path={path} next={list.data.next_cursor} query={filtered ? filters : undefined} />}
        >
          {list.data.data.map((d) => (
            <tr id={`delivery-${d.delivery_id}`}>
              <td data-label="Delivery">
                <code>{d.endpoint}</code>
                <br />
                <span class="muted">
                  run <a href={`${path}?run_id=${seg(d.run_id)}`}>{d.run_id}</a>
                  <br />
                  id <code>{d.delivery_id}</code>, {d.body_bytes} bytes, {d.signed ? "signed" : "unsigned"},{" "}
                  {when(d.created_at)}
                  {d.resent_from && (
                    <>
                      <br />
                      resends <code>{d.resent_from}</code> as message <code>{d.request_id}</code>
                    </>
                  )}
                </span>
                {d.status !== "pending" && d.status !== "held" && (
                  <form method="post" action={`${path}/${seg(d.delivery_id)}/resend`} class="below">
                    <Csrf token={c.get("csrf")} />
                    <button type="submit" class="secondary" aria-label={`Resend delivery ${d.delivery_id}`}>
                      Resend
                    </button>
                  </form>
                )}
              </td>
              <td data-label="Status">
                <Badge tone={STATUS_TONE[d.status]}>{STATUS_LABEL[d.status]}</Badge>
              </td>
              <td data-label="Attempts">
                <Attempts attempts={d.attempts} />
              </td>
              <td data-label="Last outcome">
                <Outcome code={d.last_status_code} error={d.last_error} />
                {d.completed_at && (
                  <>
                    <br />
                    <span class="muted">settled {when(d.completed_at)}</span>
                  </>
                )}
              </td>
            </tr>
          ))}
        </DataTable>
      )}
    </>,
  );
}

export function registerDeliveries(dash: DashRouter) {
  dash.get("/projects/:project_id/webhook-deliveries", (c) =>
    withProject(c, (project) => {
      // Named from the API's answer to the POST (the id must look like one), never echoed as free text.
      const resent = c.req.query("resent");
      return deliveriesPage(c, project, { resent: resent && /^whd_[0-9a-z]{1,64}$/.test(resent) ? resent : undefined });
    }),
  );
  dash.post("/projects/:project_id/webhook-deliveries/:delivery_id/resend", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const resent = await c.get("api")<Delivery>(
        "POST",
        `/projects/${seg(pid)}/webhook-deliveries/${seg(c.req.param("delivery_id"))}/resend`,
      );
      if (!resent.ok) return deliveriesPage(c, project, { problem: resent.problem });
      return c.redirect(
        projectPath(pid, `/webhook-deliveries?resent=${encodeURIComponent(resent.data.delivery_id)}`),
        303,
      );
    }),
  );
}
