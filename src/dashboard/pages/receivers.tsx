import { seg } from "../api";
import { can } from "../access";
import { type DashContext, type DashRouter, filteredDeliveries, projectPath, receiverPage } from "../context";
import { MAX_RECEIVER_CONCURRENCY } from "../../webhooks/lane-capacity";
import { Badge, Csrf, DataTable, ProblemMessage, when } from "../components";
import { count, duration, percent } from "../format";
import { renderPage } from "../layout";
import type { Receiver, ReceiverList } from "../api-types";
import { ERROR_TEXT } from "./deliveries";
import { RANGES, RangePicker, rangeOf, RunCommand, windowOf } from "../usage-view";
import { ProjectHeading, withProject } from "./project";
import { healthOf, StateControl } from "./receiver";

/** Delivered against failed as one bar: the share at a glance, the counts in its name and tooltip. */
function ShareBar({ r }: { r: Receiver }) {
  const total = r.delivered + r.failed;
  const delivered = total ? (r.delivered / total) * 100 : 0;
  const label = `${count(r.delivered)} delivered, ${count(r.failed)} failed`;
  return (
    <svg class="share" viewBox="0 0 100 8" preserveAspectRatio="none" role="img" aria-label={label}>
      <title>{label}</title>
      <rect class="tone-c2xx" x="0" y="0" width={delivered.toFixed(2)} height="8" />
      <rect class="tone-c5xx" x={delivered.toFixed(2)} y="0" width={(100 - delivered).toFixed(2)} height="8" />
    </svg>
  );
}

/** A delivery's failure reason: one of the deliveries' error codes with its words, or the API's sentence as it is. */
function Reason({ reason }: { reason: string }) {
  if (!ERROR_TEXT[reason]) return <>{reason}</>;
  return (
    <>
      <code>{reason}</code> <span class="muted">({ERROR_TEXT[reason]})</span>
    </>
  );
}

/** A receiver's concurrency and the form that sets it (1 = ordered; above 6 its lane is sharded). */
function ConcurrencyForm({ c, projectId, receiver }: { c: DashContext; projectId: string; receiver: Receiver }) {
  return (
    <form method="post" action={projectPath(projectId, "/webhook-receivers/concurrency")} class="inline">
      <Csrf token={c.get("csrf")} />
      <input type="hidden" name="origin" value={receiver.origin} />
      <input
        type="number"
        name="concurrency"
        min="1"
        max={String(MAX_RECEIVER_CONCURRENCY)}
        value={String(receiver.concurrency)}
        aria-label={`Requests in flight at once to ${receiver.origin}`}
        required
      />
      <button type="submit" class="secondary">
        Set
      </button>
      {receiver.concurrency === 1 && <span class="muted"> ordered</span>}
    </form>
  );
}

/** Pause or resume, and the recovery's dry-run count (followed on the receiver's page), for one receiver. */
function ReceiverControls({ c, pid, r, since }: { c: DashContext; pid: string; r: Receiver; since: string }) {
  return (
    <div class="below">
      <StateControl c={c} pid={pid} origin={r.origin} state={r.state} back="list" />
      {r.failed > 0 && (
        <form method="post" action={projectPath(pid, "/webhook-receivers/control")} class="inline">
          <Csrf token={c.get("csrf")} />
          <input type="hidden" name="origin" value={r.origin} />
          <input type="hidden" name="action" value="count" />
          <input type="hidden" name="since" value={since} />
          <button type="submit" class="secondary" aria-label={`Count failed to recover ${r.origin}`}>
            Count failed to recover
          </button>
        </form>
      )}
    </div>
  );
}

/** Receivers' health: per receiver origin, how its webhook deliveries fared. */
export function registerReceivers(dash: DashRouter) {
  dash.get("/projects/:project_id/webhook-receivers", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      // Seven days by default: the deliveries' records are kept that long, so it is everything there is.
      const range = rangeOf(c.req.query("range"), "7d" as const);
      const window = windowOf(range, c.var.scope.deps.now());
      const query = new URLSearchParams({ from: window.from, to: window.to });
      const list = await c.get("api")<ReceiverList>("GET", `/projects/${seg(pid)}/webhook-receivers?${query}`);
      const deliveries = projectPath(pid, "/webhook-deliveries");
      // Pause, resume, the recovery's count and the concurrency: only for someone who may use them.
      const writable = can(c, "deliveries:write");
      return renderPage(
        c,
        {
          title: "Receivers",
          projectId: pid,
          tab: "webhook-receivers",
          status: list.ok ? 200 : list.problem.status === 404 ? 404 : 400,
        },
        <>
          <ProjectHeading project={project} title="Receivers" />
          <p class="muted">
            Each origin your runs' webhooks go to (<code>?webhookEndpoint=</code>), and how its deliveries of the last{" "}
            {RANGES[range].label} fared. Every delivery and its attempts are under{" "}
            <a href={deliveries}>Webhook deliveries</a>.
          </p>
          <RangePicker c={c} current={range} />
          {!list.ok ? (
            <ProblemMessage problem={list.problem} action="Loading receivers" />
          ) : list.data.data.length === 0 ? (
            <div class="card">
              <p>
                <strong>No webhook deliveries in this range.</strong> Add <code>webhookEndpoint</code> to a run and its
                result is delivered, signed, to your receiver:
              </p>
              <RunCommand c={c} projectId={pid} appName={undefined} webhook />
            </div>
          ) : (
            <DataTable
              caption="Receivers' health"
              columns={[
                "Receiver",
                "Health",
                "Delivered",
                "Failed",
                "Retried",
                "Run → received (p95)",
                "Last failure",
                "Concurrency",
              ]}
              class="cards"
            >
              {list.data.data.map((r) => {
                const health = healthOf(r);
                return (
                  <tr>
                    <td data-label="Receiver">
                      <a href={receiverPage(pid, r.origin)}>
                        <code>{r.origin}</code>
                      </a>
                    </td>
                    <td data-label="Health">
                      <Badge tone={health.tone}>{health.label}</Badge>
                      {r.state_cause && <span class="muted"> {r.state_cause}</span>}
                      <ShareBar r={r} />
                      {r.pending > 0 && <span class="muted">{count(r.pending)} pending</span>}
                      {r.recovered > 0 && <span class="muted"> {count(r.recovered)} recovered</span>}
                      {writable && <ReceiverControls c={c} pid={pid} r={r} since={window.from} />}
                    </td>
                    <td data-label="Delivered" class="num">
                      {count(r.delivered)}
                    </td>
                    <td data-label="Failed" class="num">
                      <a
                        href={filteredDeliveries(pid, r.origin, "failed")}
                        aria-label={`Failed deliveries to ${r.origin}`}
                      >
                        {count(r.failed)}
                      </a>
                      {r.held > 0 && (
                        <>
                          <br />
                          <a
                            href={filteredDeliveries(pid, r.origin, "held")}
                            aria-label={`Held deliveries to ${r.origin}`}
                          >
                            {count(r.held)} held
                          </a>
                        </>
                      )}
                    </td>
                    <td data-label="Retried" class="num">
                      {percent(r.retried_share)}
                    </td>
                    <td data-label="Run → received (p95)" class="num">
                      {duration(r.p95_run_to_received_ms)}
                    </td>
                    <td data-label="Last failure">
                      {r.last_failure ? (
                        <>
                          <Reason reason={r.last_failure.reason} />
                          <br />
                          <span class="muted">{when(r.last_failure.at)}</span>
                        </>
                      ) : (
                        <span class="muted">none</span>
                      )}
                    </td>
                    <td data-label="Concurrency">
                      {writable ? (
                        <ConcurrencyForm c={c} projectId={pid} receiver={r} />
                      ) : (
                        <>
                          {count(r.concurrency)}
                          {r.concurrency === 1 && <span class="muted"> ordered</span>}
                        </>
                      )}
                    </td>
                  </tr>
                );
              })}
            </DataTable>
          )}
        </>,
      );
    }),
  );
  dash.post("/projects/:project_id/webhook-receivers/concurrency", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const form = await c.req.parseBody();
      const origin = typeof form.origin === "string" ? form.origin : "";
      const value = typeof form.concurrency === "string" ? form.concurrency.trim() : "";
      // A number when it reads as one; otherwise as typed, for the API to say what is wrong with it.
      const concurrency = /^\d{1,3}$/.test(value) ? Number(value) : value;
      const set = await c.get("api")("PATCH", `/projects/${seg(pid)}/webhook-receivers/${seg(origin)}`, {
        concurrency,
      });
      if (set.ok) return c.redirect(projectPath(pid, "/webhook-receivers"), 303);
      return renderPage(
        c,
        {
          title: "Receivers",
          projectId: pid,
          tab: "webhook-receivers",
          status: set.problem.status === 404 ? 404 : 400,
        },
        <>
          <ProjectHeading project={project} title="Receivers" />
          <ProblemMessage problem={set.problem} action="The concurrency was not set" />
          <p>
            <a href={projectPath(pid, "/webhook-receivers")}>Back to Receivers</a>
          </p>
        </>,
      );
    }),
  );
}
