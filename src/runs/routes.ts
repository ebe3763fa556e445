import { createRoute, z } from "@hono/zod-openapi";
import { APP_NAME } from "../apps/routes";
import { RUN_ROUTE } from "./path";
import { PROBLEM_CONTENT_TYPE } from "../platform/errors";
import {
  idParam,
  jsonContent,
  PROJECT_ID_EXAMPLE,
  problemDescriptions,
  problemHeaders,
  ProblemSchema,
  type ProblemStatus,
  REQUEST_ID_HEADER,
  stringHeader,
  Timestamp,
} from "../platform/openapi";

export const RunParams = z.object({
  project_id: idParam("project_id", "proj", PROJECT_ID_EXAMPLE),
  app_name: z
    .string()
    .regex(APP_NAME)
    .openapi({ param: { name: "app_name", in: "path" }, example: "hello-world" }),
});

/** A run's parameters: the app and its `{path}` (one or more segments, passed to the app as `{origin_url}/{path}`). */
export const RunPathParams = RunParams.extend({
  path: z.string().openapi({
    param: { name: "path", in: "path" },
    example: "run",
    description:
      "The app's path, one or more segments: a `cortex` function (`run`) or any route of a `custom` server (`v1/chat/completions`). " +
      "`runs/{run_id}` is the gateway's own (async runs).",
  }),
});

// Every other query parameter is the app's and passes through unchanged.
export const RunQuery = z.looseObject({
  webhookEndpoint: z.string().optional().openapi({
    description:
      "URL-encoded absolute https URL that also receives the response body, signed when `X-Webhook-Secret` is sent.",
  }),
  // Checked by the run itself ("true" or "false", admit.ts): runs skip the router this route describes.
  async: z
    .string()
    .optional()
    .openapi({
      description:
        "`true` or `false` (the default). `true`: answer 202 at once with the run's `status_url` and run it in the background (up to `ASYNC_RUN_TIMEOUT_MS`); " +
        "read the result there, or receive it at `webhookEndpoint`. Not passed to the app.",
    }),
});

export const RunHeaders = z.object({
  "idempotency-key": z
    .string()
    .optional()
    .openapi({
      description:
        "With `async=true` or `Prefer: wait=N`: one key, one run. The same key and request within 24 hours answer the same run and " +
        "never call the app again: an async run's 202; a waited run's retry joins it, waits again (up to its own N s) and gets its " +
        "answer (`Idempotent-Replayed: true`), or 202 with the run once handed over or ended; a waited run whose answer went to the " +
        "request that waited for it is a 409 naming it. A different request with the key is a 422. Not passed to the app.",
    }),
  prefer: z
    .string()
    .optional()
    .openapi({
      description:
        "RFC 7240. `wait=N` (1 to 60 seconds; bare `wait` is 60, more is served as 60): the app's answer if it is ready within N s, " +
        "exactly as without the header plus `Preference-Applied`; else 202 with the run, which goes on and is read at its status URL " +
        "(its webhook is delivered). A caller who hangs up while waiting hands the run over. A stream whose headers came within N s is " +
        "an answer. Ignored with `async=true`, on a WebSocket, and when N is not a positive whole number; other preferences are ignored " +
        "(and reach the app, as the whole header does).",
      example: "wait=10",
    }),
  "cancel-after": z
    .string()
    .optional()
    .openapi({
      description:
        "The run's deadline, counted from its acceptance: `30s`, `5m`, `2h30m` or whole seconds (`45`); at least 5 s, at most 24 h " +
        "(15 min with `Prefer: wait`). Past it the app's call is ended (or, for a queued async run, never made) and the run ends with " +
        "the 504 problem `run_deadline` (an async or handed-over run: `failed`, `error.code` `deadline`). Anything else is a 400 naming " +
        "the header, and the app is not called. Not passed to the app.",
      example: "5m",
    }),
});

export const RunEnvelope = z
  .object({
    run_id: z.string().openapi({ example: "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    result: z.unknown().openapi({ description: "The app's JSON response, byte for byte." }),
    run_time_ms: z.number().int(),
    timestamp: Timestamp,
  })
  .openapi("RunResult");

const description =
  "Runs the app's current deployment: the gateway calls `{origin_url}/{path}` with the caller's method, body, query (less " +
  "`webhookEndpoint` and `async`) and headers (less `Authorization`), plus `X-Run-Id`. `{path}` names a `cortex` function (`run`) or " +
  "any route of a `custom` app's server (`v1/chat/completions`: the OpenAI SDK works with `baseURL` `…/v4/{project_id}/{app_name}/v1`); " +
  "`runs/{run_id}` is the gateway's own. Bearer run key: a service account token of the project or an HS256 JWT (`project_id`, `exp`). " +
  "`Prefer: wait=N` answers within N s or hands the run over (202); `Cancel-After` sets its deadline; `async=true` answers 202 at once. " +
  "The HTTP status is the app's own. A `cortex` function's JSON answer comes in the run envelope (204/205/304 then become 200, " +
  "because the envelope is a body); every other answer passes through, streamed as the app writes it. A WebSocket upgrade is " +
  "passed through to the app.";

const AsyncAccepted = z
  .object({
    run_id: z.string().openapi({ example: "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    status: z.enum(["queued", "running", "succeeded", "failed", "cancelled"]).openapi({
      description:
        "`queued` for a new async run (a replayed `Idempotency-Key` answers the run's status now); `running` for a waited run handed " +
        "over (a waited retry under its key: the run's status now).",
    }),
    status_url: z
      .url()
      .openapi({ description: "Where to read the run (`GET`) or cancel it (`DELETE`); also the `Location` header." }),
    urls: z
      .object({
        get: z.url().openapi({ description: "`GET`: the run, and its result once it has ended." }),
        cancel: z.url().openapi({ description: "`DELETE`: cancels the run while it is queued." }),
        stream: z.url().openapi({
          description:
            "`GET` with `Accept: text/event-stream`: the run at each change of state, as server-sent events.",
        }),
      })
      .openapi({
        description: "What can be done with the run, each at its own URL (today all three are `status_url`).",
      }),
  })
  .openapi("AsyncRunAccepted");

// The body of a run and the app's answer, documented as plain schema objects rather than zod: these
// routes describe runs in the OpenAPI document only (a run skips the router: src/worker.ts hands it to
// runs/run.ts), and the run itself checks the body as the app's runtime requires.
const anyBytes = (description: string) => ({
  schema: { type: "string" as const, contentMediaType: "application/octet-stream", description },
});

/** What a run sends the app: a JSON object for a `cortex` function; anything at all for a `custom` app. */
export const RunRequestBody = {
  required: false,
  description:
    "Passed to the app as sent, with its `Content-Type`, streamed (at most 6 MiB, counted as the bytes arrive). A `cortex` function takes a JSON " +
    "object (415 for another type, 400 for anything but an object); a `custom` app takes any content type, byte for byte (multipart " +
    "uploads, audio, images).",
  content: {
    "application/json": {
      schema: {
        type: "object" as const,
        additionalProperties: true,
        description: "The function's arguments (`cortex`), or a `custom` app's JSON.",
        example: { inputs: { prompt: "a lighthouse at dusk" } },
      },
    },
    "*/*": anyBytes(
      "Any other body of a `custom` app (multipart/form-data, application/octet-stream, …), byte for byte.",
    ),
  },
};

const RUN_ID_HEADER = {
  "X-Run-Id": stringHeader("The run's id, also in the envelope, in the problem's `run_id` and in webhook deliveries."),
};

/** On every answer of a run asked with `Prefer: wait=N`: the wait it was given. */
const PREFERENCE_APPLIED = {
  "Preference-Applied": stringHeader(
    "With `Prefer: wait=N`: `wait=N`, the wait the run was given (RFC 7240); absent when the preference was not applied.",
  ),
};

/** What an app's answer may be: the envelope, or the app's own answer passed through. */
const appAnswerContent = {
  "application/json": {
    schema: z.union([
      RunEnvelope,
      z.unknown().openapi({
        description:
          "A `custom` app's own JSON, as the app sent it (an OpenAI-compatible server's chat completion, say).",
      }),
    ]),
  },
  "text/event-stream": {
    schema: {
      type: "string" as const,
      description:
        "Server-sent events, each reaching the caller as the app writes it (a `cortex` function asked with `Accept: text/event-stream`, a streamed chat completion).",
    },
  },
  "*/*": anyBytes("Any other answer (image/png, audio/wav, …), byte for byte."),
};

/** The answer: the envelope of a `cortex` function's JSON, or the app's own answer passed through. */
const runAnswer = {
  description:
    "A `cortex` function's JSON answer to a caller who did not ask for a stream comes in the run envelope. Every other answer (every " +
    "answer of a `custom` app, an event stream, an image) passes through as the app gave it: its status, `Content-Type` and other " +
    "content headers, and its body streamed as it arrives. Either way with header `X-Run-Id`, and the app's `Retry-After` on a 429 or 503.",
  headers: {
    ...REQUEST_ID_HEADER,
    "X-Run-Id": stringHeader("The run's id, also in the envelope and in webhook deliveries.", true),
    "Idempotent-Replayed": stringHeader(
      "`true` on a waited retry under the run's `Idempotency-Key` that got the run's stored answer (the status URL's `result`).",
      false,
    ),
    ...PREFERENCE_APPLIED,
  },
  content: appAnswerContent,
};

/** Any other status of the app's own, passed through (or enveloped) as the 200 describes. */
const appStatus = (range: string) => ({
  ...runAnswer,
  description: `The app's own ${range} answer, enveloped or passed through as for 200.`,
});

/** A problem of the gateway's, with the extension `run_id` once the run has an id (502, 504). */
export const RunProblemSchema = ProblemSchema.extend({
  run_id: z
    .string()
    .optional()
    .openapi({ description: "The run's id, when the run got one before it failed (502, 504)." }),
}).openapi("RunProblem", { description: "RFC 9457 problem details of a run." });

/**
 * A status the gateway answers with a problem, which the app may answer too: its own answer with that
 * status passes through (or is enveloped) like any other, so both are described.
 */
function runProblem(status: ProblemStatus, required: boolean) {
  return {
    description: `${problemDescriptions[status]} Or the app's own answer with this status, enveloped or passed through as for 200.`,
    headers: { ...REQUEST_ID_HEADER, ...RUN_ID_HEADER, ...PREFERENCE_APPLIED, ...problemHeaders(status, { required }) },
    content: { [PROBLEM_CONTENT_TYPE]: { schema: RunProblemSchema }, ...appAnswerContent },
  };
}

/** The statuses the gateway itself answers on the run operations; `test/workers/run-contract.test.ts` provokes each. */
const GATEWAY_STATUSES = {
  get: [400, 401, 403, 404, 409, 422, 429, 500, 502, 503, 504],
  post: [400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 500, 502, 503, 504],
  body: [400, 401, 403, 404, 405, 409, 413, 422, 429, 500, 502, 503, 504],
  head: [401, 403, 404, 405, 409, 429, 500, 503],
} as const satisfies Record<string, readonly ProblemStatus[]>;

const accepted = {
  ...jsonContent(
    AsyncAccepted,
    "With `async=true`: the run is queued (or, with a replayed `Idempotency-Key`, the run it started). With `Prefer: wait=N`: the " +
      "app had not answered within N s (or the caller hung up while waiting): the run is `running`, handed over; it goes on, its " +
      "result is read at `status_url` as an async run's and delivered to its webhook. A waited retry under the run's " +
      "`Idempotency-Key` gets this for the run it started, once handed over or ended.",
  ),
  headers: {
    ...REQUEST_ID_HEADER,
    "X-Run-Id": stringHeader("The run's id.", true),
    Location: stringHeader("The run's `status_url`.", true),
    "Idempotent-Replayed": stringHeader(
      "`true` when the `Idempotency-Key` names a run made before: this is that run.",
      false,
    ),
    ...PREFERENCE_APPLIED,
  },
};

function runResponses(statuses: readonly ProblemStatus[], extra: Record<string, unknown> = {}) {
  return {
    200: runAnswer,
    202: accepted,
    ...extra,
    ...Object.fromEntries(statuses.map((status) => [status, runProblem(status, false)])),
    "2XX": appStatus("2xx"),
    "3XX": appStatus("3xx"),
    "4XX": appStatus("4xx"),
    "5XX": appStatus("5xx"),
  };
}

const webSocket = {
  description: "A WebSocket upgrade (`Upgrade: websocket`), passed through to the app: the app's handshake answer.",
  headers: { ...REQUEST_ID_HEADER, "X-Run-Id": stringHeader("The run's id; the app receives it too.", true) },
};

/** The permission a credential needs to run an app or read and cancel its async runs (src/auth/permissions.ts). */
export const RUNS_SECURITY = [{ bearerAuth: ["runs:invoke"] }];

const request = { params: RunPathParams, query: RunQuery, headers: RunHeaders };
const requestWithBody = { ...request, body: RunRequestBody };

export const runPost = createRoute({
  operationId: "runApp",
  method: "post",
  path: RUN_ROUTE,
  tags: ["Runs"],
  summary: "Run an app (with a body)",
  description,
  security: RUNS_SECURITY,
  request: requestWithBody,
  responses: runResponses(GATEWAY_STATUSES.post),
});

export const runGet = createRoute({
  operationId: "runAppWithoutBody",
  method: "get",
  path: RUN_ROUTE,
  tags: ["Runs"],
  summary: "Run an app (no body), or open a WebSocket to it",
  description,
  security: RUNS_SECURITY,
  request,
  responses: runResponses(GATEWAY_STATUSES.get, { 101: webSocket }),
});

/** The methods a `custom` app's server takes besides GET and POST (a `cortex` app answers them 405). */
const customRoute = (method: "put" | "patch" | "delete", operationId: string) =>
  createRoute({
    operationId,
    method,
    path: RUN_ROUTE,
    tags: ["Runs"],
    summary: `Call a custom app's route (${method.toUpperCase()})`,
    description: `${description} Custom apps only; a cortex app answers 405.`,
    security: RUNS_SECURITY,
    request: method === "delete" ? request : requestWithBody,
    responses: runResponses(GATEWAY_STATUSES.body),
  });

export const runPut = customRoute("put", "runAppPut");
export const runPatch = customRoute("patch", "runAppPatch");
export const runDelete = customRoute("delete", "runAppDelete");

/** HEAD: refused on every run path (it would run the app for an answer nobody reads). */
export const runHead = createRoute({
  operationId: "runAppHead",
  method: "head",
  path: RUN_ROUTE,
  tags: ["Runs"],
  summary: "HEAD on a run path: refused",
  description:
    "A run never answers HEAD: it would run the app for an answer nobody reads. The key and the app are checked first, then 405 with `Allow`.",
  security: RUNS_SECURITY,
  request,
  responses: Object.fromEntries(GATEWAY_STATUSES.head.map((status) => [status, runProblem(status, status === 405)])),
});
