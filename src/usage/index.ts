import { ApiError, invalidField } from "../platform/errors";
import { rfc3339OrNull } from "../platform/openapi";
import { DAY_MS, HOUR_MS, MINUTE_MS } from "../platform/time";
import { decodeCursor, encodeCursor } from "../platform/pagination";
import { createRouter } from "../platform/router";
import { recordCallers } from "../auth/callers";
import { accepts } from "hono/accepts";
import { deliveryCounts, receiversHealth, receiverStates, runDeliveries } from "./deliveries";
import { exposition, families, OPENMETRICS_TEXT, PROMETHEUS_TEXT } from "./metrics";
import { EXPORT_TYPES, type ExportFormat, exportHeaders, exportStream, formatOf } from "./exports";
import type { Context } from "hono";
import type { z } from "@hono/zod-openapi";
import type { AppEnv } from "../platform/scope";
import { defaultReceiverSettings, projectReceiverSettings, receiverSettings } from "../webhooks/receiver-settings";
import { knownReceiver } from "../webhooks/receiver-api";
import { runningTask } from "../webhooks/receiver-tasks";
import { ledgerOf } from "./ledger-client";
import { RECORDS_RETENTION_MS, ROLLUPS_RETENTION_MS, type LedgerRecord } from "./ledger";
import {
  getMetrics,
  getRun,
  getUsage,
  type INTERVALS,
  getReceiver,
  listReceivers,
  listRuns,
  type RunDelivery,
  type RunsQuery as RunsQuerySchema,
} from "./routes";
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

const statusUrlOf = (requestUrl: string, projectId: string, record: LedgerRecord) =>
  runUrl(requestUrl, { projectId, appName: record.app_name, runId: record.run_id });

/** A run's record as the API answers it, with its webhook's delivery when one was asked. */
function itemOf(requestUrl: string, projectId: string, record: LedgerRecord, deliveries: Map<string, RunDelivery>) {
  return {
    run_id: record.run_id,
    app_name: record.app_name,
    mode: record.mode,
    method: record.method,
    path: record.path,
    status_code: record.status_code,
    ending: record.ending,
    failure: storedFailure(record.failure),
    timed_out: endedInTimeout(record.ending),
    hung_up: record.ending === "hung_up",
    handed_over: record.handed_over_ms !== null,
    duration_ms: record.duration_ms,
    ttfb_ms: record.ttfb_ms,
    times: {
      called_ms: record.called_ms,
      answered_ms: record.answered_ms,
      first_byte_ms: record.ttfb_ms,
      handed_over_ms: record.handed_over_ms,
      ended_ms: record.duration_ms,
    },
    bytes_in: record.bytes_in,
    bytes_out: record.bytes_out,
    caller: record.caller,
    // A webhook was asked; its delivery's row may still be on its way (the pending row is written first).
    webhook:
      record.webhook === 1
        ? (deliveries.get(record.run_id) ?? { delivery_id: null, status: "pending" as const, attempts: 0 })
        : null,
    status_url:
      record.mode === "async" || record.handed_over_ms !== null ? statusUrlOf(requestUrl, projectId, record) : null,
    request_id: record.request_id,
    created_at: iso(record.created_at),
  };
}

type RunsQuery = z.infer<typeof RunsQuerySchema>;
type RunItem = ReturnType<typeof itemOf>;

/** Runs an export holds at most: its pages (1,000 runs, one ledger call and a D1 read of their webhooks' each) stay far inside an invocation's 1,000 subrequests. */
export const EXPORT_MAX_RUNS = 50_000;
const EXPORT_PAGE = 1_000;

/** The export's columns: a run's record as the list answers it, flat. */
const RUN_COLUMNS: { name: string; of: (r: RunItem) => string | number | boolean | null }[] = [
  { name: "run_id", of: (r) => r.run_id },
  { name: "created_at", of: (r) => r.created_at },
  { name: "app_name", of: (r) => r.app_name },
  { name: "mode", of: (r) => r.mode },
  { name: "method", of: (r) => r.method },
  { name: "path", of: (r) => r.path },
  { name: "status_code", of: (r) => r.status_code },
  { name: "ending", of: (r) => r.ending },
  { name: "failure_by", of: (r) => r.failure?.by ?? null },
  {
    name: "failure",
    of: (r) => (r.failure === null ? null : r.failure.by === "app" ? r.failure.status : r.failure.code),
  },
  { name: "duration_ms", of: (r) => r.duration_ms },
  { name: "ttfb_ms", of: (r) => r.ttfb_ms },
  { name: "called_ms", of: (r) => r.times.called_ms },
  { name: "answered_ms", of: (r) => r.times.answered_ms },
  { name: "handed_over_ms", of: (r) => r.times.handed_over_ms },
  { name: "bytes_in", of: (r) => r.bytes_in },
  { name: "bytes_out", of: (r) => r.bytes_out },
  { name: "caller", of: (r) => r.caller },
  { name: "webhook_status", of: (r) => r.webhook?.status ?? null },
  { name: "webhook_attempts", of: (r) => r.webhook?.attempts ?? null },
  { name: "status_url", of: (r) => r.status_url },
  { name: "request_id", of: (r) => r.request_id },
];

/** One page of the runs list (`limit + 1` rows read: the extra one says there is more), as the API answers it. */
async function runsPage(
  c: Context<AppEnv>,
  projectId: string,
  q: Omit<RunsQuery, "limit" | "cursor">,
  range: { from?: number; to?: number },
  after: string | undefined,
  limit: number,
) {
  const { rows, sampled, scannedTo } = await ledgerOf(c.env, projectId).list({
    app_name: q.app_name,
    mode: q.mode,
    status: q.status,
    from: range.from,
    to: range.to,
    after,
    limit,
    callers: recordCallers(c.get("principal")),
  });
  const items = rows.slice(0, limit);
  const deliveries = await runDeliveries(
    c.var.scope,
    projectId,
    items.filter((r) => r.webhook === 1).map((r) => r.run_id),
  );
  const data = items.map((run) => itemOf(c.req.url, projectId, run, deliveries));
  const last = items.at(-1);
  // A short page whose scan stopped at its bound goes on below the last run examined.
  const next = rows.length > limit && last ? last.run_id : scannedTo;
  return { data, next, sampled };
}

/**
 * The runs of a range as a file, every page of it: refused (400 naming `from`) when the range holds
 * more than `EXPORT_MAX_RUNS` by the rollups' count, so an export is never cut short silently.
 */
async function exportRuns(c: Context<AppEnv>, projectId: string, q: RunsQuery, format: ExportFormat) {
  const now = c.var.scope.deps.now().getTime();
  const from = time(q.from) ?? now - RECORDS_RETENTION_MS;
  const to = time(q.to) ?? now + 1;
  checkedRange(from, to);
  const held = await ledgerOf(c.env, projectId).runsIn(from, to, q.app_name);
  if (held > EXPORT_MAX_RUNS) {
    throw invalidField(
      "query",
      "from",
      `the range holds ${held} runs; an export holds at most ${EXPORT_MAX_RUNS}`,
      `The range holds ${held} runs; export at most ${EXPORT_MAX_RUNS} at a time: narrow it with \`from\` and \`to\` (a day, an hour) and export the parts.`,
    );
  }
  let after = decodeCursor(q.cursor);
  let done = false;
  const body = exportStream<RunItem>(
    format,
    RUN_COLUMNS,
    (item) => item,
    async () => {
      if (done) return null;
      const page = await runsPage(c, projectId, q, { from, to }, after, EXPORT_PAGE);
      if (page.next === null) done = true;
      else after = page.next;
      return page.data;
    },
  );
  return new Response(body, { status: 200, headers: exportHeaders(format, `runs-${projectId}`) });
}

/** The usage export's columns: each point of the series, as the JSON answers it. */
const USAGE_COLUMNS = [
  "start",
  "runs",
  "status_2xx",
  "status_4xx",
  "status_5xx",
  "timeouts",
  "failures_app",
  "failures_caller",
  "failures_gateway",
  "error_rate",
  "p50_ms",
  "p95_ms",
  "p99_ms",
  "bytes_in",
  "bytes_out",
  "deliveries_delivered",
  "deliveries_failed",
] as const;

const exportFormat = (c: Context<AppEnv>) =>
  formatOf(accepts(c, { header: "Accept", supports: [...EXPORT_TYPES], default: "application/json" }));

export const usageRouter = createRouter()
  .openapi(listRuns, async (c) => {
    const { project_id } = c.req.valid("param");
    const q = c.req.valid("query");
    const format = exportFormat(c);
    if (format !== null) return (await exportRuns(c, project_id, q, format)) as never;
    const from = time(q.from);
    const to = time(q.to);
    checkedRange(from, to);
    const page = await runsPage(c, project_id, q, { from, to }, decodeCursor(q.cursor), q.limit);
    return c.json(
      { data: page.data, next_cursor: page.next === null ? null : encodeCursor(page.next), sampled: page.sampled },
      200,
    );
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
    const deliveries = await runDeliveries(c.var.scope, project_id, run.webhook === 1 ? [run.run_id] : []);
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
      deliveryCounts(c.var.scope, project_id, { from, to, step, appName: q.app_name }),
    ]);
    let delivered = 0;
    let failed = 0;
    const series = figures.series.map((point, i) => {
      const d = deliveries[i] ?? { delivered: 0, failed: 0 };
      delivered += d.delivered;
      failed += d.failed;
      return { ...point, start: iso(point.start), deliveries_delivered: d.delivered, deliveries_failed: d.failed };
    });
    const format = exportFormat(c);
    if (format !== null) {
      // The series as rows, one per interval (at most 2,160): a spreadsheet's sums are the totals.
      let sent = false;
      const body = exportStream<(typeof series)[number]>(
        format,
        USAGE_COLUMNS.map((name) => ({ name, of: (p) => p[name] })),
        (p) => p,
        async () => (sent ? null : ((sent = true), series)),
      );
      return new Response(body, {
        status: 200,
        headers: { ...exportHeaders(format, `usage-${project_id}`), "X-Usage-From": iso(from), "X-Usage-To": iso(to) },
      }) as never;
    }
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
      deliveryCounts(c.var.scope, project_id, { from: now - HOUR_MS, to: now + 1, step: HOUR_MS + 1 }),
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
      receiversHealth(c.var.scope, project_id, from, to),
      projectReceiverSettings(c.var.scope.db, project_id),
    ]);
    const concurrency = new Map(settings.map((s) => [s.origin, s.concurrency]));
    const data = health.map((h) => ({
      ...h,
      concurrency: concurrency.get(h.origin) ?? defaultReceiverSettings(project_id, h.origin).concurrency,
    }));
    return c.json({ data }, 200);
  })
  .openapi(getReceiver, async (c) => {
    const { project_id, origin: raw } = c.req.valid("param");
    const q = c.req.valid("query");
    const scope = c.var.scope;
    const origin = await knownReceiver(scope, project_id, raw);
    const now = scope.deps.now().getTime();
    const to = time(q.to) ?? now + 1;
    const from = time(q.from) ?? now - 7 * DAY_MS;
    checkedRange(from, to);
    const [[health], settings, recovering, releasing] = await Promise.all([
      receiversHealth(scope, project_id, from, to, origin),
      receiverSettings(scope.db, project_id, origin),
      runningTask(scope, project_id, origin, "recover"),
      runningTask(scope, project_id, origin, "release"),
    ]);
    return c.json(
      {
        // No delivery in the range: its figures are zeros.
        ...(health ?? {
          origin,
          delivered: 0,
          failed: 0,
          recovered: 0,
          held: 0,
          pending: 0,
          retried_share: 0,
          p95_run_to_received_ms: null,
          last_failure: null,
        }),
        state: settings.state,
        state_cause: settings.stateCause,
        state_changed_at: rfc3339OrNull(settings.stateChangedAt),
        failing_since: rfc3339OrNull(settings.failingSince),
        running_task_id: (recovering ?? releasing)?.id ?? null,
        concurrency: settings.concurrency,
      },
      200,
    );
  });
