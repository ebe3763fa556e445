import { ApiError, invalidField } from "../platform/errors";
import { DAY_MS, HOUR_MS, MINUTE_MS } from "../platform/time";
import { decodeCursor, encodeCursor } from "../platform/pagination";
import { createRouter } from "../platform/router";
import { recordCallers } from "../auth/callers";
import { accepts } from "hono/accepts";
import { deliveryCounts, receiversHealth, receiverStates, runDeliveries } from "./deliveries";
import { exposition, families, OPENMETRICS_TEXT, PROMETHEUS_TEXT } from "./metrics";
import { defaultReceiverSettings, projectReceiverSettings } from "../webhooks/receiver-settings";
import { ledgerOf } from "./ledger-client";
import { ROLLUPS_RETENTION_MS, type StoredRun } from "./ledger";
import { getMetrics, getRun, getUsage, type INTERVALS, listReceivers, listRuns, type RunDelivery } from "./routes";
import { endedInTimeout } from "./run-record";
import type { RunFailure } from "../runs/outcome";
import { runUrl } from "../runs/urls";

/** The usage API's handlers: the runs list and the figures from the project's ledger, deliveries from D1. */

const STEP_MS: Record<(typeof INTERVALS)[number], number> = { minute: MINUTE_MS, hour: HOUR_MS, day: DAY_MS };
/** Points per usage answer: 36 hours by the minute, 90 days by the hour. */
export const MAX_POINTS = 2_160;

const time = (value: string | undefined) => (value === undefined ? undefined : Date.parse(value));
const iso = (ms: number) => new Date(ms).toISOString();

function checkedRange(from: number | undefined, to: number | undefined) {
  if (from !== undefined && to !== undefined && from >= to)
    throw invalidField("query", "from", "must be before `to`", "The range is empty: `from` must be before `to`.");
}

/** A record's `failure` (`gateway:<code>`, `app:<status>`) as the API answers it. */
function storedFailure(stored: string | null): RunFailure | null {
  if (stored === null) return null;
  const colon = stored.indexOf(":");
  const by = stored.slice(0, colon);
  const what = stored.slice(colon + 1);
  return by === "app" ? { by: "app", status: Number(what) } : { by: "gateway", code: what };
}

const statusUrlOf = (requestUrl: string, projectId: string, run: StoredRun) =>
  runUrl(requestUrl, { projectId, appName: run.app_name, runId: run.run_id });

/** A stored run as the API answers it, with its webhook's delivery when one was asked. */
function itemOf(requestUrl: string, projectId: string, run: StoredRun, deliveries: Map<string, RunDelivery>) {
  return {
    run_id: run.run_id,
    app_name: run.app_name,
    mode: run.mode,
    method: run.method,
    path: run.path,
    status_code: run.status_code,
    ending: run.ending,
    failure: storedFailure(run.failure),
    timed_out: endedInTimeout(run.ending),
    hung_up: run.ending === "hung_up",
    handed_over: run.handed_over_ms !== null,
    duration_ms: run.duration_ms,
    ttfb_ms: run.ttfb_ms,
    times: {
      called_ms: run.called_ms,
      answered_ms: run.answered_ms,
      first_byte_ms: run.ttfb_ms,
      handed_over_ms: run.handed_over_ms,
      ended_ms: run.duration_ms,
    },
    bytes_in: run.bytes_in,
    bytes_out: run.bytes_out,
    caller: run.caller,
    // A webhook was asked; its delivery record may still be on its way (a pending row is written first).
    webhook:
      run.webhook === 1
        ? (deliveries.get(run.run_id) ?? { delivery_id: null, status: "pending" as const, attempts: 0 })
        : null,
    status_url: run.mode === "async" || run.handed_over_ms !== null ? statusUrlOf(requestUrl, projectId, run) : null,
    request_id: run.request_id,
    created_at: iso(run.created_at),
  };
}

export const usageRouter = createRouter()
  .openapi(listRuns, async (c) => {
    const { project_id } = c.req.valid("param");
    const q = c.req.valid("query");
    const from = time(q.from);
    const to = time(q.to);
    checkedRange(from, to);
    const after = decodeCursor(q.cursor);
    const { rows, sampled, scannedTo } = await ledgerOf(c.env, project_id).list({
      app_name: q.app_name,
      mode: q.mode,
      status: q.status,
      from,
      to,
      after,
      limit: q.limit,
      callers: recordCallers(c.get("principal")),
    });
    const items = rows.slice(0, q.limit);
    const deliveries = await runDeliveries(
      c.var.scope.db,
      project_id,
      items.filter((r) => r.webhook === 1).map((r) => r.run_id),
    );
    const data = items.map((run) => itemOf(c.req.url, project_id, run, deliveries));
    const last = items.at(-1);
    // A short page whose scan stopped at its bound goes on below the last run examined.
    const next_cursor =
      rows.length > q.limit && last ? encodeCursor(last.run_id) : scannedTo ? encodeCursor(scannedTo) : null;
    return c.json({ data, next_cursor, sampled }, 200);
  })
  .openapi(getRun, async (c) => {
    const { project_id, run_id } = c.req.valid("param");
    const run = await ledgerOf(c.env, project_id).record(run_id, recordCallers(c.get("principal")));
    if (run === null) {
      throw new ApiError(
        "not_found",
        `No record of run '${run_id}' in project '${project_id}': it is under way, was never made, or is older than 7 days.`,
      );
    }
    const deliveries = await runDeliveries(c.var.scope.db, project_id, run.webhook === 1 ? [run.run_id] : []);
    return c.json(itemOf(c.req.url, project_id, run, deliveries), 200);
  })
  .openapi(getUsage, async (c) => {
    const { project_id } = c.req.valid("param");
    const q = c.req.valid("query");
    const now = c.var.scope.deps.now().getTime();
    const step = STEP_MS[q.interval];
    // The default range ends just after now, so the current interval (and a run made this millisecond) is in it.
    const toRaw = time(q.to) ?? now + 1;
    const fromRaw = time(q.from) ?? toRaw - DAY_MS;
    checkedRange(fromRaw, toRaw);
    // Whole intervals, UTC-aligned: every point covers the same span, and the totals are their sum.
    const from = Math.floor(fromRaw / step) * step;
    const to = Math.ceil(toRaw / step) * step;
    if (from < now - ROLLUPS_RETENTION_MS - step) {
      throw invalidField(
        "query",
        "from",
        "must be within the last 90 days",
        "Usage is kept 90 days: `from` must be within them.",
      );
    }
    const points = (to - from) / step;
    if (points > MAX_POINTS) {
      throw invalidField(
        "query",
        "interval",
        `gives ${points} points; at most ${MAX_POINTS}`,
        `The range holds ${points} ${q.interval}s; ask for at most ${MAX_POINTS} points (a wider interval or a shorter range).`,
      );
    }
    const [figures, deliveries] = await Promise.all([
      ledgerOf(c.env, project_id).usage({ from, to, step, app_name: q.app_name, now }),
      deliveryCounts(c.var.scope.db, project_id, { from, to, step, appName: q.app_name }),
    ]);
    let delivered = 0;
    let failed = 0;
    const series = figures.series.map((point, i) => {
      const d = deliveries[i] ?? { delivered: 0, failed: 0 };
      delivered += d.delivered;
      failed += d.failed;
      return { ...point, start: iso(point.start), deliveries_delivered: d.delivered, deliveries_failed: d.failed };
    });
    return c.json(
      {
        interval: q.interval,
        from: iso(from),
        to: iso(to),
        asked: { from: iso(fromRaw), to: iso(toRaw) },
        widened: from !== fromRaw || to !== toRaw,
        series,
        totals: {
          ...figures.totals,
          deliveries_delivered: delivered,
          deliveries_failed: failed,
          refused: figures.refused,
        },
        percentiles: figures.percentiles,
        sampled: figures.sampled,
        partial: figures.partial,
      },
      200,
    );
  })
  .openapi(getMetrics, async (c) => {
    const { project_id } = c.req.valid("param");
    const openMetrics =
      accepts(c, {
        header: "Accept",
        supports: ["application/openmetrics-text", "text/plain"],
        default: "text/plain",
      }) === "application/openmetrics-text";
    const now = c.var.scope.deps.now().getTime();
    // One ledger call (a row per app and mode), one D1 count of the last hour's deliveries, one of receivers.
    const [{ counters, refusals }, deliveries, receivers] = await Promise.all([
      ledgerOf(c.env, project_id).counters(),
      deliveryCounts(c.var.scope.db, project_id, { from: now - HOUR_MS, to: now + 1, step: HOUR_MS + 1 }),
      receiverStates(c.var.scope.db, project_id),
    ]);
    const text = exposition(
      families(counters, refusals, { deliveries: deliveries[0] ?? { delivered: 0, failed: 0 }, receivers }),
      openMetrics ? "openmetrics" : "prometheus",
    );
    return new Response(text, {
      status: 200,
      headers: {
        "Content-Type": openMetrics ? OPENMETRICS_TEXT : PROMETHEUS_TEXT,
        "Cache-Control": "no-store",
        Vary: "Accept",
      },
    }) as never;
  })
  .openapi(listReceivers, async (c) => {
    const { project_id } = c.req.valid("param");
    const q = c.req.valid("query");
    const now = c.var.scope.deps.now().getTime();
    const to = time(q.to) ?? now + 1;
    const from = time(q.from) ?? now - 7 * DAY_MS;
    checkedRange(from, to);
    const [health, settings] = await Promise.all([
      receiversHealth(c.var.scope.db, project_id, from, to),
      projectReceiverSettings(c.var.scope.db, project_id),
    ]);
    const concurrency = new Map(settings.map((s) => [s.origin, s.concurrency]));
    const data = health.map((h) => ({
      ...h,
      concurrency: concurrency.get(h.origin) ?? defaultReceiverSettings(project_id, h.origin).concurrency,
    }));
    return c.json({ data }, 200);
  });
