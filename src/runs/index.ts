import type { Context } from "hono";
import type { AppEnv } from "../platform/context";
import { ApiError, problemBody, PROBLEM_CONTENT_TYPE } from "../platform/errors";
import { createRouter, requestIdOf } from "../platform/factory";
import { newId } from "../platform/ids";
import { checkTarget } from "../platform/url-policy";
import { enqueueDelivery } from "../webhooks/enqueue";
import { upstreamOf } from "./deployments";
import { callerStatus, callUpstream, envelope, readLimited, RUN_REQUEST_MAX_BYTES, upstreamHeaders, upstreamUrl } from "./proxy";
import { runCaller } from "./run-key";
import { runGet, runPost } from "./routes";

const JSON_TYPE = /^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i;
const MAX_SECRET_LENGTH = 1024;

interface Webhook {
  endpoint: string;
  secret: string | undefined;
}

/** `webhookEndpoint` and `X-Webhook-Secret`, checked before anything runs. */
function webhookOf(c: Context<AppEnv>): Webhook | null {
  const endpoint = new URL(c.req.url).searchParams.get("webhookEndpoint");
  const secret = c.req.header("x-webhook-secret");
  // Without a receiver the secret has nothing to sign; it is dropped (never forwarded).
  if (endpoint === null) return null;
  const check = checkTarget(endpoint, { allowInsecure: c.get("config").allowInsecureTargets });
  if (!check.ok) throw fieldError("query", "webhookEndpoint", check.reason);
  if (secret !== undefined && (secret.length === 0 || secret.length > MAX_SECRET_LENGTH)) {
    throw fieldError("header", "X-Webhook-Secret", `must be 1 to ${MAX_SECRET_LENGTH} characters`);
  }
  return { endpoint: check.url.href, secret };
}

const fieldError = (location: string, field: string, message: string) =>
  new ApiError("validation_failed", `The ${location} has 1 invalid field(s).`, { errors: [{ location, field, message }] });

/** The caller's JSON body, exactly as sent, after checking it is a JSON object within the size limit. */
async function runBody(c: Context<AppEnv>): Promise<Uint8Array | undefined> {
  if (c.req.method !== "POST") return undefined;
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > RUN_REQUEST_MAX_BYTES) throw new ApiError("payload_too_large", `Run request bodies are limited to ${RUN_REQUEST_MAX_BYTES} bytes.`);
  const bytes = await readLimited(c.req.raw.body, RUN_REQUEST_MAX_BYTES);
  if (bytes === null) throw new ApiError("payload_too_large", `Run request bodies are limited to ${RUN_REQUEST_MAX_BYTES} bytes.`);
  if (bytes.byteLength === 0) return undefined;
  const type = c.req.header("content-type");
  if (!type || !JSON_TYPE.test(type)) {
    throw new ApiError("unsupported_media_type", `Send the run's arguments as application/json (got ${type ?? "no Content-Type"}).`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new ApiError("malformed_json", "The request body is not valid JSON.");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw fieldError("body", "(root)", "must be a JSON object");
  }
  return bytes;
}

const isWebSocket = (c: Context<AppEnv>) => c.req.method === "GET" && c.req.header("upgrade")?.toLowerCase() === "websocket";

async function run(c: Context<AppEnv>, projectId: string, appName: string): Promise<Response> {
  const caller = await runCaller(c);
  if (caller.projectId !== "*" && caller.projectId !== projectId) {
    // A key of another project learns nothing about this one.
    throw new ApiError("not_found", `No app named '${appName}' in project '${projectId}'.`);
  }
  const deps = c.get("deps");
  const webSocket = isWebSocket(c);
  // Webhooks apply to HTTP runs only (spec 4.2); on a WebSocket the parameter is ignored.
  const webhook = webSocket ? null : webhookOf(c);
  const body = await runBody(c);
  const upstream = await upstreamOf(c.get("db"), projectId, appName, deps.now().getTime());
  const runId = newId("run", deps.now().getTime());
  const target = upstreamUrl(upstream.originUrl, c.req.url);
  const headers = upstreamHeaders(c.req.raw.headers, runId, webSocket);

  if (webSocket) {
    const response = await deps.outbound.fetch(new Request(target, { headers }));
    caller.afterRun();
    if (response.status !== 101 || !response.webSocket) {
      await response.body?.cancel().catch(() => undefined);
      throw new ApiError("bad_gateway", `The app refused the WebSocket upgrade (status ${response.status}).`, {
        extensions: { run_id: runId },
        headers: { "X-Run-Id": runId },
      });
    }
    return new Response(null, { status: 101, webSocket: response.webSocket, headers: { "X-Run-Id": runId } });
  }

  if (body && !headers.has("content-type")) headers.set("Content-Type", "application/json");
  headers.set("Accept", "application/json");
  const request = new Request(target, { method: c.req.method, headers, body: body ?? null });
  let status: number;
  let text: string;
  let responseHeaders: Record<string, string>;
  try {
    const answer = await callUpstream(deps, request, runId, c.get("config").runTimeoutMs);
    status = callerStatus(answer.status);
    text = envelope(runId, answer, deps.now());
    responseHeaders = { "Content-Type": "application/json", "X-Run-Id": runId, "Cache-Control": "no-store" };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    // An upstream failure is still this run's answer: the webhook receives it too.
    status = error.status;
    text = JSON.stringify(problemBody(error, requestIdOf(c)));
    responseHeaders = { "Content-Type": PROBLEM_CONTENT_TYPE, "X-Run-Id": runId, "Cache-Control": "no-store" };
  }
  caller.afterRun();
  if (webhook) {
    c.executionCtx.waitUntil(
      enqueueDelivery(c.env, c.get("config"), deps, { projectId, runId, endpoint: webhook.endpoint, secret: webhook.secret, body: text }),
    );
  }
  return new Response(text, { status, headers: responseHeaders });
}

/** The run proxy, mounted at `/v4`. */
export function createRunProxy() {
  return createRouter()
    .openapi(runPost, (c) => {
      const { project_id, app_name } = c.req.valid("param");
      return run(c, project_id, app_name) as never;
    })
    .openapi(runGet, (c) => {
      const { project_id, app_name } = c.req.valid("param");
      return run(c, project_id, app_name) as never;
    });
}
