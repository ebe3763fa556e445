import { type Deployment, deploymentOf } from "../apps/deployments";
import { insufficientScope } from "../auth/access";
import { ApiError, invalidField } from "../platform/errors";
import { isJsonType } from "../platform/http";
import { jsonSyntaxOf } from "../platform/json-syntax";
import type { Scope } from "../platform/scope";
import { checkOutboundUrl } from "../platform/url-policy";
import { admitCaller, admitRun } from "./rate-limits";
import { METHODS_OF, type RunTarget } from "./path";
import {
  bodyTooLarge,
  declaredBody,
  limitedStream,
  readLimited,
  RUN_REQUEST_MAX_BYTES,
  type RunBody,
  type StoredBody,
  storedBody,
} from "./bodies";
import type { RunCaller } from "./run-key";
import { newId } from "../platform/ids";
import { outcomePath, type RunMode, type RunStart } from "./outcome";
import { cancelAfter, waitPreference } from "./preferences";
import { keyShard } from "./wait/shard";
import { idInShard } from "../platform/shards";
import { sealSecret } from "../webhooks/secret-box";
import { appRequestOf } from "./app-request";
import type { AppRequest } from "./call";
import type { AdmittedMode, AdmittedRun } from "./admitted";
import { idempotencyKeyOf, requestHashOf } from "./idempotency";

/**
 * The admit stage: everything checked before the app is called. The caller's key, the project's run
 * budget, the app (its deployment and runtime), the method, the gateway's own parameters and
 * the body, in three steps: `identify` (the caller), `admitApp` (the budget and the app), `admitRequest`
 * (the rest). Nothing here calls the app.
 */

const MAX_SECRET_LENGTH = 1024;

interface Webhook {
  endpoint: string;
  secret: string | undefined;
}

/**
 * What admission gives the run's owner: the admitted run (the one value that travels, admitted.ts), the
 * app's request built from it (`appRequestOf`: called now, by the keeper, or stored for the consumer),
 * the caller's body as admitted (a streamed body is counted as it flows: `bytesIn`), and, for a run kept
 * under a key or stored (async), that body as a run stores it, made once for the key's hash and the store.
 */
export interface Admission {
  run: AdmittedRun;
  appRequest: AppRequest;
  body: RunBody;
  stored: StoredBody | null;
}

/** `webhookEndpoint` and `X-Webhook-Secret`, checked before anything runs. */
function webhookOf(scope: Scope, request: Request, query: URLSearchParams | null): Webhook | null {
  const endpoints = query?.getAll("webhookEndpoint") ?? [];
  // Without a receiver the secret has nothing to sign; it is dropped (never forwarded).
  if (endpoints.length === 0) return null;
  if (endpoints.length > 1) throw invalidField("query", "webhookEndpoint", "must be given once");
  const secret = request.headers.get("x-webhook-secret") ?? undefined;
  const check = checkOutboundUrl(endpoints[0]!, { allowInsecure: scope.config.allowInsecureTargets });
  if (!check.ok) throw invalidField("query", "webhookEndpoint", check.reason);
  if (secret !== undefined && (secret.length === 0 || secret.length > MAX_SECRET_LENGTH)) {
    throw invalidField("header", "X-Webhook-Secret", `must be 1 to ${MAX_SECRET_LENGTH} characters`);
  }
  return { endpoint: check.url.href, secret };
}

const tooLarge = () => bodyTooLarge();

/** How a body read whole is watched: who hears the bytes that crossed, and how long it may take. */
export interface BodyRead {
  read?: (bytes: number) => void;
  /** The run's deadline for the whole body (`RUN_TIMEOUT_MS`): a caller that stalls its upload gets a 408. */
  timeoutMs?: number;
}

/**
 * The caller's body, whole, within the limit and the run's deadline: a body held open (64 KiB, then
 * nothing) would otherwise hold up to 6 MiB for as long as the caller likes.
 */
async function wholeBody(request: Request, { read, timeoutMs }: BodyRead): Promise<Uint8Array> {
  const deadline = timeoutMs === undefined ? undefined : new AbortController();
  const timer = deadline && setTimeout(() => deadline.abort(), timeoutMs);
  try {
    const bytes = await readLimited(request.body, RUN_REQUEST_MAX_BYTES, read, deadline?.signal);
    if (bytes === null) throw tooLarge();
    return bytes;
  } catch (error) {
    if (deadline?.signal.aborted)
      throw new ApiError("request_timeout", `The request body did not arrive whole within ${timeoutMs} ms.`);
    throw error;
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

/** A `cortex` run's body: a JSON object, exactly as sent. */
async function functionArguments(request: Request, watch: BodyRead): Promise<RunBody> {
  const bytes = await wholeBody(request, watch);
  if (bytes.byteLength === 0) return { kind: "none" };
  const type = request.headers.get("content-type") ?? undefined;
  if (!isJsonType(type)) {
    throw new ApiError(
      "unsupported_media_type",
      `Send the run's arguments as application/json (got ${type ?? "no Content-Type"}).`,
    );
  }
  // Checked, never parsed: the app parses it, and a parse here would build a throw-away object graph
  // many times the body's size (json-syntax.ts).
  const syntax = jsonSyntaxOf(bytes);
  if (!syntax.valid)
    throw new ApiError(
      "malformed_json",
      `The request body is not valid JSON: ${syntax.reason} at byte ${syntax.offset}.`,
    );
  if (syntax.root !== "object") throw invalidField("body", "(root)", "must be a JSON object");
  return { kind: "bytes", bytes };
}

/**
 * The body of a run: checked (`cortex`), read whole (`whole`: an async or waited run), or streamed as it comes (`custom`). A body
 * read whole is read within `watch.timeoutMs`, and `watch.read` hears its bytes as they crossed (a
 * refused body's too).
 */
export async function bodyOf(
  request: Request,
  runtime: "cortex" | "custom",
  whole: boolean,
  watch: BodyRead = {},
): Promise<RunBody> {
  if (request.body === null || request.method === "GET") return { kind: "none" };
  const declared = declaredLength(request);
  if (declared !== null && declared > RUN_REQUEST_MAX_BYTES) throw tooLarge();
  if (runtime === "cortex") return functionArguments(request, watch);
  if (whole) {
    const bytes = await wholeBody(request, watch);
    return bytes.byteLength === 0 ? { kind: "none" } : { kind: "bytes", bytes };
  }
  // A declared length is the runtime's to hold the body to (checked against the limit above): the body
  // goes through its own pipe. Without one, the bytes are counted as they flow.
  if (declared !== null) return { kind: "stream", ...declaredBody(request.body, declared) };
  return { kind: "stream", ...limitedStream(request.body, RUN_REQUEST_MAX_BYTES) };
}

/** The body's declared length (`Content-Length`), or `null` when it has none (chunked) or a malformed one. */
function declaredLength(request: Request): number | null {
  const value = request.headers.get("content-length");
  if (value === null || !/^\d{1,15}$/.test(value)) return null;
  return Number(value);
}

/** Whether the caller asked for an async run: `?async=true`; `false` or no parameter is a synchronous run. */
export function asyncRequested(query: URLSearchParams | null): boolean {
  const values = query?.getAll("async") ?? [];
  if (values.length === 0) return false;
  if (values.length > 1) throw invalidField("query", "async", "must be given once");
  if (values[0] === "true") return true;
  if (values[0] === "false") return false;
  throw invalidField("query", "async", 'must be "true" or "false"');
}

const isWebSocket = (request: Request) =>
  request.method === "GET" && request.headers.get("upgrade")?.toLowerCase() === "websocket";

/** The caller's query string, parsed only when there is one (most runs have none). */
function queryOf(url: string): URLSearchParams | null {
  const mark = url.indexOf("?");
  if (mark === -1 || mark === url.length - 1) return null;
  const hash = url.indexOf("#", mark);
  return new URLSearchParams(url.slice(mark + 1, hash === -1 ? undefined : hash));
}

/** The caller's key, for `target`'s project: refused (401, 403, a 404 for another project's key) before the run is anyone's. */
export async function identify(scope: Scope, request: Request, target: RunTarget): Promise<RunCaller> {
  const { projectId, appName } = target;
  const caller = await admitCaller(scope, request);
  if (caller.projectId !== undefined && caller.projectId !== projectId) {
    // A key of another project learns nothing about this one.
    throw new ApiError("not_found", `No app named '${appName}' in project '${projectId}'.`);
  }
  if (!caller.mayRun) throw insufficientScope(["runs:invoke"]);
  return caller;
}

/**
 * The project's run budget and the app's deployment. A request refused here never reached a known app
 * (the budget spent, an app the project does not have, the store unavailable): a refusal (`refusalOf`),
 * counted but never a run, since it names nothing the caller may not invent. An app with no ready
 * deployment (409) is known: that refusal is a run's.
 */
export async function admitApp(scope: Scope, target: RunTarget): Promise<Deployment> {
  await admitRun(scope, target.projectId);
  return deploymentOf(scope.db, target.projectId, target.appName, scope.deps.now().getTime());
}

/** The reason (a problem code) of a refusal, for an error `admitApp` threw; `null` when the app was known (409). */
export function refusalOf(error: unknown): string | null {
  if (!(error instanceof ApiError)) return "internal_error";
  return error.code === "no_deployment" ? null : error.code;
}

/**
 * How the caller asked for the run, read leniently for its outcome (a malformed `?async` or `Prefer` is
 * refused later, by `admitRequest`): `?async=true` wins over `Prefer: wait`, as admission has it.
 */
export const modeAsked = (query: URLSearchParams | null, prefer: string | null): RunMode =>
  query?.get("async") === "true" ? "async" : prefer !== null && /(^|[,;\s])wait\b/i.test(prefer) ? "wait" : "sync";

/** What a run is from its start, once its caller is known: its id, who, which app and path, and how it was asked. */
export function startOf(
  scope: Scope,
  request: Request,
  target: RunTarget,
  caller: RunCaller,
  acceptedAt: number,
): RunStart & { query: URLSearchParams | null } {
  const query = queryOf(request.url);
  const id = newId("run", acceptedAt);
  // A run under a key gets an id in the key's keeper shard: a waited run's retries reach its keeper.
  const key = request.headers.get("idempotency-key");
  return {
    runId: key === null ? id : idInShard(id, keyShard(caller.id, key)),
    projectId: target.projectId,
    appName: target.appName,
    path: outcomePath(target.appPath),
    method: request.method,
    mode: modeAsked(query, request.headers.get("prefer")),
    caller: caller.id,
    requestId: scope.requestId,
    acceptedAt,
    query,
  };
}

/**
 * Admits the request to the app `deployment`: a problem for anything that must not reach it (the method,
 * the gateway's own parameters, the body). Nothing here calls the app. `read` hears the bytes of a body
 * read whole as they cross, so a run refused for its body counts what it read. The run's mode is worked
 * out here, once; its webhook secret is sealed under the run's id, and its key's request hashed.
 */
export async function admitRequest(
  scope: Scope,
  request: Request,
  target: RunTarget,
  start: RunStart & { query: URLSearchParams | null },
  deployment: Deployment,
  read?: (bytes: number) => void,
): Promise<Admission> {
  const { config } = scope;
  const allowed: readonly string[] = METHODS_OF[deployment.runtime];
  // HEAD included: Hono would answer it by running the app for a body nobody receives.
  if (!allowed.includes(request.method)) {
    const what = deployment.runtime === "cortex" ? "A cortex app's functions take" : "Runs take";
    throw new ApiError("method_not_allowed", `${what} ${allowed.join(", ")}; not ${request.method}.`, {
      headers: { Allow: allowed.join(", ") },
    });
  }
  const webSocket = isWebSocket(request);
  const { query, runId } = start;
  // Webhooks apply to HTTP runs only (spec 4.2); on a WebSocket the parameter is ignored.
  const webhook = webSocket ? null : webhookOf(scope, request, query);
  const isAsync = asyncRequested(query);
  if (isAsync && webSocket) throw invalidField("query", "async", "does not apply to a WebSocket");
  // A WebSocket is a pass-through of its own: it neither waits nor takes a deadline. `?async=true` wins
  // over `Prefer: wait` (a preference may be ignored; the parameter is a demand).
  const wait = isAsync || webSocket ? null : waitPreference(request.headers.get("prefer"));
  const kind = webSocket ? "websocket" : isAsync ? "async" : wait !== null ? "wait" : "sync";
  const key = kind === "async" || kind === "wait" ? idempotencyKeyOf(request) : null;
  const deadline = webSocket ? null : request.headers.get("cancel-after");
  const cancelAfterMs = deadline === null ? null : cancelAfter(deadline, kind === "websocket" ? "sync" : kind);
  // A waited run's body is read whole, as an async run's is: it crosses to the run's keeper in one
  // piece, and its size limit is a 413 here rather than a broken upload in the keeper's call.
  const body = await bodyOf(request, deployment.runtime, kind === "async" || kind === "wait", {
    read,
    timeoutMs: config.runTimeoutMs,
  });
  const appRequest = appRequestOf(request, {
    runId,
    appPath: target.appPath,
    originUrl: deployment.originUrl,
    runtime: deployment.runtime,
    query,
    body,
    kind,
  });
  const bytes = body.kind === "bytes" ? body.bytes : null;
  const stored = bytes !== null && (kind === "async" || key !== null) ? storedBody(bytes) : null;
  const requestKey =
    key === null
      ? null
      : {
          value: key,
          requestHash: await requestHashOf({
            method: request.method,
            appName: target.appName,
            appPath: target.appPath,
            query,
            webhookEndpoint: webhook?.endpoint ?? null,
            body: stored,
          }),
        };
  const mode: AdmittedMode =
    kind === "wait"
      ? { kind, seconds: wait!, key: requestKey }
      : kind === "async"
        ? { kind, key: requestKey }
        : { kind };
  const run: AdmittedRun = {
    v: 1,
    runId,
    projectId: target.projectId,
    appName: target.appName,
    appPath: target.appPath,
    method: request.method,
    caller: start.caller,
    requestId: scope.requestId,
    runtime: deployment.runtime,
    acceptHeader: appRequest.headers.get("accept"),
    limits: {
      // An async run's call may take ASYNC_RUN_TIMEOUT_MS (its consumer has 15 minutes); any other the run's timeout.
      headersMs: kind === "async" ? config.asyncRunTimeoutMs : config.runTimeoutMs,
      idleMs: config.runStreamIdleMs,
    },
    acceptedAt: start.acceptedAt,
    cancelAfterMs,
    webhook:
      webhook === null
        ? null
        : {
            endpoint: webhook.endpoint,
            // Sealed at once, bound to the run's id: no owner holds it in clear (webhooks/secret-box.ts).
            secret:
              webhook.secret === undefined
                ? null
                : await sealSecret(config.webhookEncryptionKey, runId, webhook.secret),
          },
    bytesIn: bytes?.byteLength ?? 0,
    mode,
  };
  return { run, appRequest, body, stored };
}
