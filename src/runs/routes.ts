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

// Every other query parameter is the app's and passes through unchanged.
export const RunQuery = z.looseObject({
  webhookEndpoint: z
    .string()
    .optional()
    .openapi({ description: "URL-encoded absolute https URL that also receives the response body, signed when `X-Webhook-Secret` is sent." }),
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

const responses = {
  200: jsonContent(RunEnvelope, "The run's envelope; header `X-Run-Id`."),
  ...problems(400, 401, 404, 409, 413, 415, 502, 504),
};

export const runPost = createRoute({
  method: "post",
  path: RUN_ROUTE,
  tags: ["Runs"],
  summary: "Run an app (JSON body)",
  description,
  request: { params: RunParams, query: RunQuery },
  responses,
});

export const runGet = createRoute({
  method: "get",
  path: RUN_ROUTE,
  tags: ["Runs"],
  summary: "Run an app (no body), or open a WebSocket to it",
  description,
  request: { params: RunParams, query: RunQuery },
  responses,
});
