import { createRoute, z } from "@hono/zod-openapi";
import { APP_NAME } from "../apps/routes";
import { RUN_ROUTE } from "./path";
import { idParam, jsonContent, PROJECT_ID_EXAMPLE, problems, Timestamp } from "../platform/openapi";

export const RunParams = z.object({
  project_id: idParam("project_id", "proj", PROJECT_ID_EXAMPLE),
  app_name: z
    .string()
    .regex(APP_NAME)
    .openapi({ param: { name: "app_name", in: "path" }, example: "hello-world" }),
});

/** A run's parameters: the app and its `{path}` (one or more segments, passed to the app as `{origin_url}/{path}`). */
export const RunPathParams = RunParams.extend({
  path: z
    .string()
    .openapi({
      param: { name: "path", in: "path" },
      example: "run",
      description:
        "The app's path, one or more segments: a `cortex` function (`run`) or any route of a `custom` server (`v1/chat/completions`). " +
        "`runs/{run_id}` is the gateway's own (async runs).",
    }),
});

// Every other query parameter is the app's and passes through unchanged.
export const RunQuery = z.looseObject({
  webhookEndpoint: z
    .string()
    .optional()
    .openapi({ description: "URL-encoded absolute https URL that also receives the response body, signed when `X-Webhook-Secret` is sent." }),
  // Checked by the run itself ("true" or "false"), so the run entry and the router refuse alike.
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
      description: "With `async=true`: the same key and request within 24 hours answer the same run; a different request with the key is a 422.",
    }),
});

export const RunEnvelope = z
  .object({
    run_id: z.string().openapi({ example: "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    result: z.unknown().openapi({ description: "The upstream's JSON response, byte for byte." }),
    run_time_ms: z.number().int(),
    timestamp: Timestamp,
  })
  .openapi("RunResult");

const description =
  "Runs the app's current deployment. Bearer run key: a service account token of the project or an HS256 JWT " +
  "(`project_id`, `exp`). The HTTP status is the upstream's own (2xx and error statuses alike; 204/205/304 become 200 " +
  "because the envelope is a body). A WebSocket upgrade is passed through to the upstream.";

const AsyncAccepted = z
  .object({
    run_id: z.string().openapi({ example: "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    status: z.enum(["queued", "running", "succeeded", "failed", "cancelled"]).openapi({ description: "`queued` for a new run; a replayed `Idempotency-Key` answers the run's status now." }),
    status_url: z.url().openapi({ description: "Where to read the run (`GET`) or cancel it (`DELETE`); also the `Location` header." }),
  })
  .openapi("AsyncRunAccepted");

const responses = {
  200: jsonContent(RunEnvelope, "The run's envelope; header `X-Run-Id`."),
  202: jsonContent(AsyncAccepted, "With `async=true`: the run is queued. Headers `Location` (the `status_url`) and `X-Run-Id`."),
  ...problems(400, 401, 403, 404, 409, 413, 415, 422, 502, 503, 504),
};

/** The permission a credential needs to run an app or read and cancel its async runs (src/auth/permissions.ts). */
export const RUNS_SECURITY = [{ bearerAuth: ["runs:invoke"] }];

const request = { params: RunPathParams, query: RunQuery, headers: RunHeaders };

export const runPost = createRoute({
  operationId: "runApp",
  method: "post",
  path: RUN_ROUTE,
  tags: ["Runs"],
  summary: "Run an app (JSON body)",
  description,
  security: RUNS_SECURITY,
  request,
  responses,
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
  responses,
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
    request,
    responses,
  });

export const runPut = customRoute("put", "runAppPut");
export const runPatch = customRoute("patch", "runAppPatch");
export const runDelete = customRoute("delete", "runAppDelete");
