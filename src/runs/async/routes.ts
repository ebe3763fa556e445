import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../../auth/access";
import { ASYNC_RUN_STATUSES, STATUS_URL_MODES } from "../../db/schema";
import { PROBLEM_CONTENT_TYPE } from "../../platform/errors";
import {
  idParam,
  jsonContent,
  ListQuery,
  listOf,
  ProblemSchema,
  problemsWithHeaders,
  ProjectParams,
  REQUEST_ID_HEADER,
  SCOPED_PROBLEMS,
  stringHeader,
  Timestamp,
} from "../../platform/openapi";
import { ASYNC_RUN_ROUTE } from "../path";
import { RunParams, runDelete, runGet, runHead, runPatch, runPost, runPut, RUNS_SECURITY as security } from "../routes";

export const RUN_ID_EXAMPLE = "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c";

export const AsyncRunParams = RunParams.extend({ run_id: idParam("run_id", "run", RUN_ID_EXAMPLE) });

export const RunError = z
  .object({
    code: z.string().openapi({
      description:
        "`upstream_status` (the app answered a non-2xx status; `result` is its envelope), `bad_gateway`, `gateway_timeout` " +
        "(no answer within `ASYNC_RUN_TIMEOUT_MS`), `interrupted` (the worker running it stopped; never run twice), `expired` (never started).",
    }),
    message: z.string(),
  })
  .openapi("AsyncRunError");

export const AsyncRunSchema = z
  .object({
    run_id: z.string().openapi({ example: RUN_ID_EXAMPLE }),
    status: z.enum(ASYNC_RUN_STATUSES),
    app_name: z.string(),
    mode: z.enum(STATUS_URL_MODES).openapi({
      description:
        "How the run was asked for: `async` (`?async=true`), or `wait` (`Prefer: wait`, handed over when the app had not answered in time).",
    }),
    created_at: Timestamp.openapi({ description: "When the run was accepted." }),
    started_at: Timestamp.nullable().openapi({ description: "When the app was called; null until then." }),
    handed_over_at: Timestamp.nullable().openapi({
      description:
        "A waited run: when its caller stopped waiting (the 202, or a hang-up) and the gateway kept the run. Null otherwise.",
    }),
    deadline_at: Timestamp.nullable().openapi({
      description: "The run's `Cancel-After` deadline, counted from its acceptance; null without one.",
    }),
    finished_at: Timestamp.nullable().openapi({ description: "When the run ended; null until then." }),
    status_code: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "The HTTP status the synchronous run would have answered; null until finished." }),
    error: RunError.nullable(),
    result: z.unknown().openapi({
      description:
        "Once finished: exactly the body the synchronous run would have answered (the envelope `{run_id, result, run_time_ms, timestamp}`, " +
        "or the problem of a failed run), byte for byte; the webhook receives the same bytes. Null while queued or running, and when cancelled.",
    }),
  })
  .openapi("AsyncRun");

/** The problem of cancelling a run that is no longer queued: the run's state beside the HTTP status, never in place of it. */
export const RunNotCancellable = ProblemSchema.extend({
  run_id: z.string().openapi({ example: RUN_ID_EXAMPLE }),
  run_status: z
    .enum(ASYNC_RUN_STATUSES)
    .openapi({ description: "The run's state: `running`, `succeeded` or `failed`." }),
}).openapi("RunNotCancellableProblem");

/** What a follower of a run sends: the media type it wants, and the last event it has. */
const FollowHeaders = z.object({
  accept: z.string().optional().openapi({
    description: "`text/event-stream` to follow the run as a stream of events; anything else reads it once as JSON.",
    example: "text/event-stream",
  }),
  "last-event-id": z.string().optional().openapi({
    description:
      "With `Accept: text/event-stream`: the `id` of the last event received (1, 2 or 3); the stream resumes after it. Any other value is a 400.",
    example: "2",
  }),
});

const STREAM_RUN_ID = { "X-Run-Id": stringHeader("The run's id, on its stream of events.") };

const ok = <T extends z.ZodType>(schema: T, description: string) => ({
  ...jsonContent(schema, description),
  headers: REQUEST_ID_HEADER,
});

export const getAsyncRun = createRoute({
  operationId: "getAsyncRun",
  method: "get",
  path: ASYNC_RUN_ROUTE,
  tags: ["Runs"],
  security,
  summary: "Read or follow an async run",
  description:
    "The state of a run started with `?async=true`, and its result once finished. Results are kept 7 days after the run finished.\n\n" +
    "**Following a run.** Asked with `Accept: text/event-stream` (what an `EventSource` sends), the answer is a stream of " +
    "server-sent events: the run resource (the same JSON as this read) as one event each time the run's state changes " +
    "(`queued`, `running`, then `succeeded`, `failed` or `cancelled`, with its result), a comment line `: keep-alive` every 15 s, " +
    "and the stream closes after the end. An event's `id` is its state's place in that order (`1` queued, `2` running, `3` the end): " +
    "reconnecting with `Last-Event-ID` sends only what came after it, and once the end was sent, 204 (an `EventSource` then stops). " +
    "An event reaches the stream within milliseconds of the change. A stream may close before the end (after about half an hour " +
    "of an unchanged run, or when the gateway restarts) with `retry: 1000`; reconnect with `Last-Event-ID`, as an `EventSource` does. " +
    "At most 8 streams follow one run and 64 are open in one project at once; past either, 429 (`rate_limited`, with `limit`) and `Retry-After`.",
  request: { params: AsyncRunParams, headers: FollowHeaders },
  responses: {
    200: {
      description: "The run (JSON), or its stream of events (`Accept: text/event-stream`).",
      headers: { ...REQUEST_ID_HEADER, ...STREAM_RUN_ID },
      content: {
        "application/json": { schema: AsyncRunSchema },
        "text/event-stream": {
          schema: z.string().openapi({
            description:
              "Server-sent events. Each event: `data:` the run resource as JSON (as the JSON read answers it; lines of a " +
              "multi-line result each as a `data:` line), `id:` 1, 2 or 3. Between events, `: keep-alive` comments.",
            example:
              'data: {"run_id":"run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c","status":"running","app_name":"hello","created_at":"2026-11-21T12:00:00.000Z","started_at":"2026-11-21T12:00:00.120Z","finished_at":null,"status_code":null,"error":null,"result":null}\nid: 2\n\n: keep-alive\n\n',
          }),
        },
      },
    },
    204: {
      description: "Asked for events with the `Last-Event-ID` of the run's last event: nothing more will come.",
      headers: { ...REQUEST_ID_HEADER, ...STREAM_RUN_ID },
    },
    ...problemsWithHeaders(400, 401, 403, 404, 429, 500, 503),
  },
});

export const cancelAsyncRun = createRoute({
  operationId: "cancelAsyncRun",
  method: "delete",
  path: ASYNC_RUN_ROUTE,
  tags: ["Runs"],
  security,
  summary: "Cancel an async run",
  description:
    "Cancels a queued run: it will not run and no webhook is sent. Cancelling a cancelled run answers the same 200; a running or finished run: 409.",
  request: { params: AsyncRunParams },
  responses: {
    200: ok(AsyncRunSchema, "The cancelled run."),
    ...problemsWithHeaders(401, 403, 404, 429, 500, 503),
    409: {
      description: "The run is running or finished (`run_not_cancellable`): `run_status` says which.",
      headers: REQUEST_ID_HEADER,
      content: { [PROBLEM_CONTENT_TYPE]: { schema: RunNotCancellable } },
    },
  },
});

export const headAsyncRun = createRoute({
  operationId: "headAsyncRun",
  method: "head",
  path: ASYNC_RUN_ROUTE,
  tags: ["Runs"],
  security,
  summary: "HEAD on an async run: refused",
  description: "An async run is read with `GET` (or cancelled with `DELETE`); HEAD is answered 405 with `Allow`.",
  request: { params: AsyncRunParams },
  responses: problemsWithHeaders(404, 405, 500),
});

export const AsyncRunSummary = AsyncRunSchema.omit({ result: true })
  .extend({
    duration_ms: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "From start to finish; null until both happened." }),
    webhook_endpoint: z.string().nullable(),
  })
  .openapi("AsyncRunSummary");

export const listAsyncRuns = createRoute({
  operationId: "listAsyncRuns",
  method: "get",
  path: "/projects/{project_id}/async-runs",
  tags: ["Runs"],
  ...requires("runs:invoke"),
  summary: "List async runs",
  description:
    "Runs started with `?async=true` in every state (queued and running too), newest first, without their results (read one with `GET /v4/{project_id}/{app_name}/runs/{run_id}`). " +
    "Every run of every mode, once finished, is in `GET /v2/projects/{project_id}/runs`.",
  request: {
    params: ProjectParams,
    query: ListQuery.extend({
      status: z.enum(ASYNC_RUN_STATUSES).optional().openapi({ description: "Only runs in this state." }),
    }),
  },
  responses: {
    200: jsonContent(listOf(AsyncRunSummary, "AsyncRunList"), "A page of runs, newest first."),
    ...SCOPED_PROBLEMS,
  },
});

export const readAsyncRun = createRoute({
  operationId: "readAsyncRun",
  method: "get",
  path: "/projects/{project_id}/async-runs/{run_id}",
  tags: ["Runs"],
  ...requires("runs:invoke"),
  summary: "Read an async run",
  description:
    "One run with a status URL (started with `?async=true`, or waited and handed over), with its result once ended: the same " +
    "resource as `GET /v4/{project_id}/{app_name}/runs/{run_id}`, for whoever lists the project's runs (`GET …/async-runs`): " +
    "its owners and the operator see every run, anyone else only the runs made as them. Any other run is a 404.",
  request: { params: ProjectParams.extend({ run_id: idParam("run_id", "run", RUN_ID_EXAMPLE) }) },
  responses: { 200: jsonContent(AsyncRunSchema, "The run."), ...SCOPED_PROBLEMS },
});

/** The run proxy's operations, served under `/v4` and documented in the one OpenAPI document. */
export const RUN_PROXY_ROUTES = [
  runPost,
  runGet,
  runPut,
  runPatch,
  runDelete,
  runHead,
  getAsyncRun,
  cancelAsyncRun,
  headAsyncRun,
];
