import { upstreamOf } from "../apps/deployments";
import { insufficientScope } from "../auth/access";
import { ApiError, invalidField } from "../platform/errors";
import { isJsonType } from "../platform/http";
import { newId } from "../platform/ids";
import type { Scope } from "../platform/scope";
import { checkTarget } from "../platform/url-policy";
import { enqueuePending, type PendingDelivery, recordPending, settleUnsent } from "../webhooks/enqueue";
import { answerRun, type RunAnswer } from "./answer";
import { acceptAsync, asyncRequested } from "./async/accept";
import { cutShortAfterHangUp } from "./hang-up";
import { readLimited, RUN_REQUEST_MAX_BYTES, upstreamHeaders, upstreamUrl } from "./proxy";
import { webSocketHandshake } from "./handshake";
import { admitCaller, admitRun } from "./limits";

const MAX_SECRET_LENGTH = 1024;

interface Webhook {
  endpoint: string;
  secret: string | undefined;
}

/** `webhookEndpoint` and `X-Webhook-Secret`, checked before anything runs. */
function webhookOf(scope: Scope, request: Request, query: URLSearchParams | null): Webhook | null {
  const endpoints = query?.getAll("webhookEndpoint") ?? [];
  // Without a receiver the secret has nothing to sign; it is dropped (never forwarded).
  if (endpoints.length === 0) return null;
  if (endpoints.length > 1) throw invalidField("query", "webhookEndpoint", "must be given once");
  const secret = request.headers.get("x-webhook-secret") ?? undefined;
  const check = checkTarget(endpoints[0]!, { allowInsecure: scope.config.allowInsecureTargets });
  if (!check.ok) throw invalidField("query", "webhookEndpoint", check.reason);
  if (secret !== undefined && (secret.length === 0 || secret.length > MAX_SECRET_LENGTH)) {
    throw invalidField("header", "X-Webhook-Secret", `must be 1 to ${MAX_SECRET_LENGTH} characters`);
  }
  return { endpoint: check.url.href, secret };
}

/** The caller's JSON body, exactly as sent, after checking it is a JSON object within the size limit. */
async function runBody(request: Request): Promise<Uint8Array | undefined> {
  if (request.method !== "POST") return undefined;
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > RUN_REQUEST_MAX_BYTES) throw new ApiError("payload_too_large", `Run request bodies are limited to ${RUN_REQUEST_MAX_BYTES} bytes.`);
  const bytes = await readLimited(request.body, RUN_REQUEST_MAX_BYTES);
  if (bytes === null) throw new ApiError("payload_too_large", `Run request bodies are limited to ${RUN_REQUEST_MAX_BYTES} bytes.`);
  if (bytes.byteLength === 0) return undefined;
  const type = request.headers.get("content-type") ?? undefined;
  if (!isJsonType(type)) {
    throw new ApiError("unsupported_media_type", `Send the run's arguments as application/json (got ${type ?? "no Content-Type"}).`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new ApiError("malformed_json", "The request body is not valid JSON.");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw invalidField("body", "(root)", "must be a JSON object");
  }
  return bytes;
}

const isWebSocket = (request: Request) => request.method === "GET" && request.headers.get("upgrade")?.toLowerCase() === "websocket";

/** The caller's query string, parsed only when there is one (most runs have none). */
function queryOf(url: string): URLSearchParams | null {
  const mark = url.indexOf("?");
  if (mark === -1 || mark === url.length - 1) return null;
  const hash = url.indexOf("#", mark);
  return new URLSearchParams(url.slice(mark + 1, hash === -1 ? undefined : hash));
}

/** A run of `{project_id}/{app_name}`: the caller's key checked, the upstream called, the envelope returned. */
export async function run(scope: Scope, request: Request, projectId: string, appName: string): Promise<Response> {
  const { deps, config } = scope;
  // Hono answers HEAD by running the GET handler: a run (and its webhook) whose body nobody receives.
  if (request.method === "HEAD") {
    throw new ApiError("method_not_allowed", "Runs take GET or POST; HEAD would run the app for an answer nobody reads.", { headers: { Allow: "GET, POST" } });
  }
  const caller = await admitCaller(scope, request);
  if (caller.projectId !== undefined && caller.projectId !== projectId) {
    // A key of another project learns nothing about this one.
    throw new ApiError("not_found", `No app named '${appName}' in project '${projectId}'.`);
  }
  if (!caller.mayRun) throw insufficientScope(["runs:invoke"]);
  await admitRun(scope, projectId);
  const webSocket = isWebSocket(request);
  const query = queryOf(request.url);
  // Webhooks apply to HTTP runs only (spec 4.2); on a WebSocket the parameter is ignored.
  const webhook = webSocket ? null : webhookOf(scope, request, query);
  const isAsync = asyncRequested(query);
  if (isAsync && webSocket) throw invalidField("query", "async", "does not apply to a WebSocket");
  const body = await runBody(request);
  const now = deps.now().getTime();
  const upstream = await upstreamOf(scope.db, projectId, appName, now);
  if (isAsync) {
    const response = await acceptAsync(scope, request, { projectId, appName, caller: caller.id, originUrl: upstream.originUrl, query, body, webhook });
    caller.afterRun();
    return response;
  }
  const runId = newId("run", now);
  const target = upstreamUrl(upstream.originUrl, query);
  const headers = upstreamHeaders(request.headers, runId, webSocket);

  if (webSocket) {
    const response = await webSocketHandshake(scope, target, headers, runId);
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
  const call = (cancel?: AbortSignal) => answerRun(deps, target, { method: request.method, headers, body: body ?? null }, runId, config.runTimeoutMs, scope.requestId, cancel);
  if (!webhook) {
    const answer = await call();
    caller.afterRun();
    return responseOf(answer, runId);
  }

  // The delivery is on record before the upstream is called, and the rest of the run is carried in
  // `waitUntil`: a caller who hangs up still gets the delivery (within RUN_AFTER_HANG_UP_MS), and a
  // run cut short ends its record `failed` (`run_interrupted`), never absent.
  const pending = await recordPending(scope, { projectId, runId, endpoint: webhook.endpoint, secret: webhook.secret });
  const answered = answerForDelivery(scope, request, pending, call);
  // The caller has the answer as soon as the upstream gave it; the enqueue goes on after (spec 6: the
  // delivery does not block the response).
  const work = answered.then(({ answer, cutShort }) => (cutShort ? undefined : enqueuePending(scope, pending, answer.text))).finally(() => caller.afterRun());
  scope.ctx.waitUntil(work.then(() => undefined, () => undefined));
  return responseOf((await answered).answer, runId);
}

// An upstream failure is still this run's answer (a problem): the webhook receives it too.
const responseOf = (answer: RunAnswer, runId: string) =>
  new Response(answer.text, { status: answer.status, headers: { "Content-Type": answer.contentType, "X-Run-Id": runId, "Cache-Control": "no-store" } });

/**
 * The run's answer with a webhook: the upstream called, cut short if the caller hung up too long ago;
 * a run that did not finish settles its pending delivery as `run_interrupted`.
 */
async function answerForDelivery(
  scope: Scope,
  request: Request,
  pending: PendingDelivery,
  call: (cancel?: AbortSignal) => Promise<RunAnswer>,
): Promise<{ answer: RunAnswer; cutShort: boolean }> {
  const cutShort = cutShortAfterHangUp(request, scope.deps);
  let answer: RunAnswer;
  try {
    answer = await call(cutShort.signal);
  } catch (error) {
    await settleUnsent(scope, pending, "run_interrupted");
    throw error;
  } finally {
    cutShort.dispose();
  }
  if (cutShort.signal.aborted) {
    await settleUnsent(scope, pending, "run_interrupted");
    return { answer, cutShort: true };
  }
  return { answer, cutShort: false };
}
