import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../auth/access";
import { DELIVERY_STATUSES, RECEIVER_STATES } from "../db/schema";
import { RUN_ENDINGS, RUN_MODES } from "./run-record";
import { ReceiverParams } from "../webhooks/receiver-routes";
import {
  idParam,
  jsonContent,
  ListQuery,
  listOf,
  ProjectParams,
  SCOPED_PROBLEMS,
  Timestamp,
} from "../platform/openapi";

/** The usage API: every run on record, the project's figures over time, and its webhook receivers' health. */

const APP_NAME_FILTER = z.string().min(1).max(63).optional().openapi({ description: "Only this app's runs." });
const RangeBound = (which: string) =>
  z.iso.datetime({ offset: true }).optional().openapi({ description: which, example: "2026-11-21T12:00:00Z" });

export const RunFailureSchema = z
  .discriminatedUnion("by", [
    z.object({ by: z.literal("gateway"), code: z.string().openapi({ example: "gateway_timeout" }) }),
    z.object({ by: z.literal("app"), status: z.number().int().openapi({ example: 500 }) }),
  ])
  .openapi("RunFailure");

export const RunsQuery = ListQuery.extend({
  app_name: APP_NAME_FILTER,
  mode: z
    .enum(RUN_MODES)
    .optional()
    .openapi({ description: "Only runs asked this way: `sync`, `wait` (`Prefer: wait`) or `async` (`?async=true`)." }),
  status: z
    .enum(["2xx", "4xx", "5xx"])
    .optional()
    .openapi({ description: "Only runs whose caller got a status of this class (`2xx` is every status below 400)." }),
  from: RangeBound("Only runs made at or after this time (RFC 3339)."),
  to: RangeBound("Only runs made before this time (RFC 3339)."),
}).strict();

export const RunDelivery = z
  .object({
    delivery_id: z.string().nullable().openapi({ description: "The delivery's id; null while it is being recorded." }),
    status: z.enum(DELIVERY_STATUSES).openapi({
      description: "`held`: stored, not attempted, while its receiver is paused or disabled.",
    }),
    attempts: z.number().int(),
  })
  .openapi("RunDelivery");
/** A run's webhook delivery as the runs list shows it (the first one made; a resend is a delivery of its own). */
export type RunDelivery = z.infer<typeof RunDelivery>;

export const RunRecordSchema = z
  .object({
    run_id: z.string().openapi({ example: "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    app_name: z.string(),
    mode: z.enum(RUN_MODES).openapi({
      description:
        "How the run was asked: `sync` (the answer on the same connection), `wait` (`Prefer: wait=N`), `async` (`?async=true`).",
    }),
    method: z.string().openapi({ example: "POST" }),
    path: z.string().openapi({
      description: "The app's path the run called (`run`, `v1/chat/completions`), without the query.",
      example: "run",
    }),
    status_code: z
      .number()
      .int()
      .openapi({ description: "The status the caller got (an async run: the status of its stored result)." }),
    ending: z.enum(RUN_ENDINGS).openapi({
      description:
        "How the run ended: `answered` (the app's answer reached its end, whatever its status), `hung_up` (the caller left first), " +
        "`timeout` (the gateway's time limits: no headers in time, or a stream silent too long), `deadline` (the caller's `Cancel-After` passed), " +
        "`unreachable` (the app could not be reached, or its answer broke off), `refused` (refused once the app was known: size, type, method, no deployment, a bad parameter), " +
        "`interrupted` (the platform stopped the run's owner mid-call; never called twice), `error` (the gateway failed).",
    }),
    failure: RunFailureSchema.nullable().openapi({
      description:
        "Whose failure the run's error was: the gateway's (`by: gateway`, its problem `code`) or the app's (`by: app`, its own `status` of 400 or more); null when nobody failed.",
    }),
    timed_out: z.boolean().openapi({
      description: "The run ended on a time limit: the gateway's (`ending` `timeout`) or the caller's (`deadline`).",
    }),
    hung_up: z.boolean().openapi({ description: "The caller hung up before the answer ended (`ending` `hung_up`)." }),
    handed_over: z.boolean().openapi({
      description:
        "A waited run whose caller stopped waiting (202, or a hang-up while waiting): its state is at `status_url`.",
    }),
    duration_ms: z.number().int().openapi({
      description: "From acceptance (`created_at`) to the run's end: the answer's end, or an async run's finish.",
    }),
    ttfb_ms: z.number().int().nullable().openapi({
      description: "To the first byte of a streamed (passed-through) answer; null otherwise (`times.first_byte_ms`).",
    }),
    times: z
      .object({
        called_ms: z.number().int().nullable().openapi({ description: "The app's call was sent." }),
        answered_ms: z.number().int().nullable().openapi({ description: "The app's response headers came." }),
        first_byte_ms: z
          .number()
          .int()
          .nullable()
          .openapi({ description: "The first byte of a passed-through answer reached the caller." }),
        handed_over_ms: z
          .number()
          .int()
          .nullable()
          .openapi({ description: "A waited run's caller stopped waiting (202, or a hang-up while waiting)." }),
        ended_ms: z.number().int().openapi({ description: "The run ended (`duration_ms`)." }),
      })
      .openapi("RunTimes", {
        description:
          "The run's moments, each in ms after its acceptance (`created_at`); null for a moment the run never had. Records made before these were kept have only `first_byte_ms` and `ended_ms`.",
      }),
    bytes_in: z.number().int().openapi({ description: "Bytes of the caller's body." }),
    bytes_out: z.number().int().openapi({ description: "Bytes of the answer that crossed (decoded)." }),
    caller: z.string().openapi({
      description:
        "Who made the run: `sa:<service account id>`, `jwt:<subject>`, `user:<person id>` or `admin`; never a credential.",
    }),
    webhook: RunDelivery.nullable().openapi({
      description: "The webhook delivery of the run's answer, when one was asked for.",
    }),
    status_url: z.string().nullable().openapi({
      description:
        "An async or handed-over run's own state and stored result (`GET /v4/{project_id}/{app_name}/runs/{run_id}`); null otherwise.",
    }),
    request_id: z.string().openapi({ description: "The `X-Request-Id` of the request that made the run." }),
    created_at: Timestamp,
  })
  .openapi("RunRecord");

export const RunRecordList = listOf(RunRecordSchema, "RunRecordList").extend({
  sampled: z.boolean().openapi({
    description:
      "True when the project made more runs in the range than its records keep: the list then shows about one run in a hundred for that time (usage figures stay exact).",
  }),
});

/** The files a list or series may be asked as (`Accept`), beside JSON: docs/usage.md "Exports". */
const exportContent = (what: string, csvExample: string, ndjsonExample: string) => ({
  "text/csv": {
    schema: z.string().openapi({
      description: `${what} as CSV (RFC 4180): a header row, then one record per line (CRLF); a text a spreadsheet would read as a formula starts with \`'\`.`,
      example: csvExample,
    }),
  },
  "application/x-ndjson": {
    schema: z.string().openapi({
      description: `${what} as NDJSON: one JSON object per line, as the JSON answer's items.`,
      example: ndjsonExample,
    }),
  },
});

export const listRuns = createRoute({
  operationId: "listRuns",
  method: "get",
  path: "/projects/{project_id}/runs",
  tags: ["Usage"],
  ...requires("usage:read"),
  summary: "List runs",
  description:
    "Every run of the project, synchronous and async, newest first, whatever its answer (an app's error, a timeout, a caller who hung up, a refusal for size). " +
    "No body is kept. Records are kept 7 days. An async run's full state stays at its `status_url`. " +
    "A service account sees the runs it made; people with the scope see the project's. " +
    "A page examines at most 25,000 records: when the filters match few of them, it may hold fewer than `limit` runs (even none) and a `next_cursor` to go on; the list ends when `next_cursor` is null.\n\n" +
    "**Exports.** With `Accept: text/csv` or `Accept: application/x-ndjson`, the answer is every run of the range that matches the filters (`from` defaults to 7 days ago), " +
    "newest first, streamed page by page; `limit` does not apply, `cursor` starts it below a run. A range of more than 50,000 runs (by the rollups' count, before the filters) is a 400 naming `from`: export it in parts.",
  request: { params: ProjectParams, query: RunsQuery },
  responses: {
    200: {
      description: "A page of runs, newest first (JSON); or every run of the range as CSV or NDJSON.",
      content: {
        "application/json": { schema: RunRecordList },
        ...exportContent(
          "The runs",
          "run_id,created_at,app_name,mode,method,path,status_code,ending,failure_by,failure,duration_ms,ttfb_ms,called_ms,answered_ms,handed_over_ms,bytes_in,bytes_out,caller,webhook_status,webhook_attempts,status_url,request_id\r\n" +
            "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c,2026-11-21T12:00:00.000Z,hello,sync,POST,run,200,answered,,,42,,3,40,,17,120,sa:sa_01jd7m2q3r4s5t6v7w8x9y0z1a,,,,req_01jd7m2q3r4s5t6v7w8x9y0z1a\r\n",
          '{"run_id":"run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c","app_name":"hello","mode":"sync","status_code":200,"ending":"answered","failure":null}\n',
        ),
      },
    },
    ...SCOPED_PROBLEMS,
  },
});

export const RunRecordParams = ProjectParams.extend({
  run_id: idParam("run_id", "run", "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c"),
});

export const getRun = createRoute({
  operationId: "getRunRecord",
  method: "get",
  path: "/projects/{project_id}/runs/{run_id}",
  tags: ["Usage"],
  ...requires("usage:read"),
  summary: "Read a run's record",
  description:
    "One run's record, as the list shows it: how it ended, whose failure, its moments. 404 while the run is under way (its record is made when it ended), " +
    "after its 7 days, or for another caller's run when read with a service account token. An async or handed-over run's stored result is at its `status_url`.",
  request: { params: RunRecordParams },
  responses: { 200: jsonContent(RunRecordSchema, "The run's record."), ...SCOPED_PROBLEMS },
});

export const INTERVALS = ["minute", "hour", "day"] as const;

export const UsageQuery = z
  .object({
    from: RangeBound("Start of the range (RFC 3339); rounded down to the interval. Default: `to` less 24 hours."),
    to: RangeBound("End of the range (RFC 3339), exclusive; rounded up to the interval. Default: now."),
    interval: z
      .enum(INTERVALS)
      .default("hour")
      .openapi({ description: "The width of each point of the series (UTC-aligned)." }),
    app_name: APP_NAME_FILTER,
  })
  .strict();

const Figures = {
  runs: z.number().int(),
  status_2xx: z.number().int().openapi({ description: "Runs whose caller got a status below 400." }),
  status_4xx: z.number().int(),
  status_5xx: z.number().int(),
  timeouts: z.number().int().openapi({ description: "Runs that ended on the gateway's time limit." }),
  failures_app: z.number().int().openapi({
    description:
      "Runs that were the app's failure: its own 5xx, or it could not be reached, answered too slowly, or had no deployment.",
  }),
  failures_caller: z.number().int().openapi({
    description:
      "Runs that were the caller's mistake: refused by the gateway (size, type, method, a bad parameter or header, a reused key), the app's own 4xx, or the caller's `Cancel-After` passed.",
  }),
  failures_gateway: z.number().int().openapi({
    description: "Runs that were the gateway's failure: a fault of its own (a 5xx problem), an owner stopped mid-run.",
  }),
  error_rate: z.number().nullable().openapi({
    description:
      "The app's failures over the runs (0 to 1; null without runs): a caller's mistakes and the gateway's faults do not count.",
    example: 0.02,
  }),
  p50_ms: z.number().int().nullable().openapi({ description: "Median duration; null without runs." }),
  p95_ms: z.number().int().nullable(),
  p99_ms: z.number().int().nullable(),
  bytes_in: z.number().int(),
  bytes_out: z.number().int(),
  deliveries_delivered: z
    .number()
    .int()
    .openapi({ description: "Webhook deliveries of the interval's runs that reached their receiver." }),
  deliveries_failed: z.number().int(),
};

export const UsagePointSchema = z.object({ start: Timestamp, ...Figures }).openapi("UsagePoint");

export const UsageSchema = z
  .object({
    interval: z.enum(INTERVALS),
    from: Timestamp.openapi({
      description: "The series' start, aligned to the interval: the range the figures cover.",
    }),
    to: Timestamp.openapi({ description: "The series' end (exclusive), aligned to the interval." }),
    asked: z.object({ from: Timestamp, to: Timestamp }).openapi({
      description: "The range as asked (or defaulted: the last 24 hours), before it was widened to whole intervals.",
    }),
    widened: z.boolean().openapi({
      description:
        "True when `from` or `to` differ from `asked`: the figures cover whole intervals (UTC), so a range that does not align is widened, never narrowed. Ask with aligned bounds (or a finer interval) for exactly the range.",
    }),
    series: z
      .array(UsagePointSchema)
      .openapi({ description: "One point per interval, oldest first; intervals without runs are zeros." }),
    totals: z
      .object({
        ...Figures,
        refused: z.record(z.string(), z.number().int()).openapi({
          description:
            "Requests refused before their app was known, per reason (the problem code: `rate_limited` over the project's run budget, `not_found` for an app the project does not have). " +
            "Not runs: counted by the hour (the hours the range touches), never listed; empty with `app_name` (a refusal has no app).",
          example: { rate_limited: 120, not_found: 3 },
        }),
      })
      .openapi("UsageTotals"),
    percentiles: z.enum(["exact", "histogram"]).openapi({
      description:
        "How p50/p95/p99 were computed: `exact` from every run's record (nearest rank), or `histogram` from the minute rollups' latency histograms (within 5 %), " +
        "when the range reaches past the records' 7 days, holds more than 25,000 runs, or its records were sampled.",
    }),
    sampled: z.boolean().openapi({
      description: "Whether the range's run records were sampled (counts, bytes and status classes stay exact).",
    }),
    partial: z.boolean().openapi({
      description:
        "With `app_name`: whether the app's figures may miss runs of the range. While a project's ledger is full (1.6 times " +
        "`USAGE_LEDGER_BYTES_MAX`), no new row of an app is made and those runs are counted in the project's figures alone, " +
        "which stay exact. Always false without `app_name`.",
    }),
  })
  .openapi("Usage");

export const getUsage = createRoute({
  operationId: "getUsage",
  method: "get",
  path: "/projects/{project_id}/usage",
  tags: ["Usage"],
  ...requires("usage:read"),
  summary: "Usage over time",
  description:
    "The project's runs over time (or one app's): counts by status class, timeouts, latency percentiles, bytes each way, webhook deliveries. " +
    "Minute rollups are kept 90 days. At most 2,160 points per answer (e.g. 36 hours by the minute, 90 days by the hour). " +
    "Failures are split by whose they were (the app's, the caller's mistakes, the gateway's); `error_rate` counts the app's only. " +
    "A range that does not align with the interval is widened to whole intervals: `from`/`to` say the range used, `asked` the one asked, `widened` whether they differ.\n\n" +
    "**Exports.** With `Accept: text/csv` or `Accept: application/x-ndjson`, the series as rows (one per interval, the columns of a point), streamed; " +
    "the range used is in `X-Usage-From` and `X-Usage-To`, and the totals are the rows' sums.",
  request: { params: ProjectParams, query: UsageQuery },
  responses: {
    200: {
      description: "The series and its totals (JSON); or the series as CSV or NDJSON rows.",
      content: {
        "application/json": { schema: UsageSchema },
        ...exportContent(
          "The series",
          "start,runs,status_2xx,status_4xx,status_5xx,timeouts,failures_app,failures_caller,failures_gateway,error_rate,p50_ms,p95_ms,p99_ms,bytes_in,bytes_out,deliveries_delivered,deliveries_failed\r\n" +
            "2026-11-21T12:00:00.000Z,40,38,1,1,0,1,1,0,0.025,35,80,120,4800,9600,0,0\r\n",
          '{"start":"2026-11-21T12:00:00.000Z","runs":40,"status_2xx":38,"failures_app":1,"error_rate":0.025}\n',
        ),
      },
    },
    ...SCOPED_PROBLEMS,
  },
});

export const ReceiversQuery = z
  .object({
    from: RangeBound("Deliveries made at or after this time (RFC 3339). Default: 7 days ago."),
    to: RangeBound("Deliveries made before this time (RFC 3339). Default: now."),
  })
  .strict();

export const ReceiverHealthSchema = z
  .object({
    origin: z.string().openapi({ example: "https://hooks.example.com" }),
    state: z.enum(RECEIVER_STATES).openapi({
      description:
        "`active`, `paused` (new deliveries held) or `disabled` (the receiver said stop, or failed for too long).",
    }),
    state_cause: z.string().nullable().openapi({ description: "Why it is paused or disabled." }),
    failing_since: Timestamp.nullable().openapi({
      description:
        "Since when its deliveries fail: the end of the first failed delivery after its last delivered one; null while its last settled delivery was delivered.",
    }),
    delivered: z.number().int(),
    failed: z.number().int().openapi({ description: "Failed, and not delivered since (see `recovered`)." }),
    recovered: z.number().int().openapi({
      description: "Failed, then delivered later by a resend or a recovery of the same message.",
    }),
    held: z.number().int().openapi({ description: "Held while the receiver is paused or disabled." }),
    pending: z.number().int(),
    retried_share: z
      .number()
      .openapi({ description: "Share (0 to 1) of settled deliveries that needed more than one attempt." }),
    p95_run_to_received_ms: z.number().int().nullable().openapi({
      description: "95th percentile, over delivered ones, of the time from the run to the receiver's 2xx.",
    }),
    last_failure: z.object({ at: Timestamp, reason: z.string() }).nullable(),
    concurrency: z.number().int().openapi({
      description:
        "Requests in flight to it at once, as set with `PATCH …/webhook-receivers/{origin}` (6 when never set; 1 is ordered).",
    }),
  })
  .openapi("WebhookReceiverHealth");

export const listReceivers = createRoute({
  operationId: "listWebhookReceivers",
  method: "get",
  path: "/projects/{project_id}/webhook-receivers",
  tags: ["Webhooks"],
  ...requires("deliveries:read"),
  summary: "Webhook receivers' health",
  description:
    "Each receiver origin the project's deliveries went to in the range: its state (paused, disabled and why), delivered, failed, recovered, held, share retried, p95 time from run to received, last failure and its reason. A receiver paused or disabled is listed even without deliveries in the range.",
  request: { params: ProjectParams, query: ReceiversQuery },
  responses: {
    200: jsonContent(
      z.object({ data: z.array(ReceiverHealthSchema) }).openapi("WebhookReceiverHealthList"),
      "One entry per receiver origin, busiest first.",
    ),
    ...SCOPED_PROBLEMS,
  },
});

export const ReceiverDetailSchema = ReceiverHealthSchema.extend({
  state_changed_at: Timestamp.nullable().openapi({ description: "When it was last paused, disabled or resumed." }),
  running_task_id: z.string().nullable().openapi({
    description:
      "The recovery (or the sending of what was held) under way for it, to follow at `…/webhook-receivers/{origin}/tasks/{task_id}`; null when none runs.",
  }),
}).openapi("WebhookReceiverDetail");

export const getReceiver = createRoute({
  operationId: "getWebhookReceiver",
  method: "get",
  path: "/projects/{project_id}/webhook-receivers/{origin}",
  tags: ["Webhooks"],
  ...requires("deliveries:read"),
  summary: "One webhook receiver's state and health",
  description:
    "A receiver origin of the project (one its deliveries went to, or one with settings): its state (paused, disabled and why, since when) and its health over the deliveries made in the range, the figures of `GET …/webhook-receivers` for it alone. An origin the project never delivered to is a 404.",
  request: { params: ReceiverParams, query: ReceiversQuery },
  responses: { 200: jsonContent(ReceiverDetailSchema, "The receiver."), ...SCOPED_PROBLEMS },
});

export const getMetrics = createRoute({
  operationId: "getMetrics",
  method: "get",
  path: "/projects/{project_id}/metrics",
  tags: ["Usage"],
  ...requires("usage:read"),
  summary: "Metrics for Prometheus",
  description:
    "The project's figures for a Prometheus (or any OpenMetrics) scrape: runs by app, mode and status class, failures by whose they were " +
    "(`app`, `caller`, `gateway`), timeouts, run durations as a histogram, bytes each way, refusals by reason (counters since each app's row began), " +
    "settled webhook deliveries of the last hour by outcome, and paused or disabled receivers (gauges). " +
    "`Accept: application/openmetrics-text` answers OpenMetrics 1.0 (with `_created` and `# EOF`); anything else the Prometheus text format 0.0.4. " +
    "Labels are bounded: app, mode, status class, whose, reason, outcome, state; never a path or a caller. A scrape reads one row per app and mode. See docs/metrics.md.",
  request: { params: ProjectParams },
  responses: {
    200: {
      description: "The metrics, in the format the `Accept` header chose.",
      content: {
        "text/plain; version=0.0.4": {
          schema: z.string().openapi({
            example:
              '# HELP gateway_runs_total Runs that ended, by app, mode and status class.\n# TYPE gateway_runs_total counter\ngateway_runs_total{app="hello",mode="sync",status_class="2xx"} 42\n',
          }),
        },
        "application/openmetrics-text; version=1.0.0": {
          schema: z.string().openapi({
            example:
              '# HELP gateway_runs Runs that ended, by app, mode and status class.\n# TYPE gateway_runs counter\ngateway_runs_total{app="hello",mode="sync",status_class="2xx"} 42\ngateway_runs_created{app="hello",mode="sync",status_class="2xx"} 1795000000\n# EOF\n',
          }),
        },
      },
    },
    ...SCOPED_PROBLEMS,
  },
});
