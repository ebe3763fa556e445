import type { Deps } from "../platform/deps";
import { isTimeout } from "../platform/http";
import { ApiError } from "../platform/errors";

/** Request bodies up to this size are accepted (413 above, before the body is read when declared). */
export const RUN_REQUEST_MAX_BYTES = 6 * 1024 * 1024;
/** Upstream answers up to this size are returned (and delivered); larger ones are a 502. */
export const RUN_RESPONSE_MAX_BYTES = 10 * 1024 * 1024;

// Not forwarded: the caller's credentials and the webhook secret stay with us; hop-by-hop headers and
// the length are the fetch's own.
const DROPPED = new Set([
  "authorization",
  "cookie",
  "host",
  "x-webhook-secret",
  "connection",
  "keep-alive",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "content-length",
]);

export function upstreamHeaders(incoming: Headers, runId: string, keepUpgrade = false): Headers {
  const headers = new Headers();
  for (const [name, value] of incoming) {
    if (DROPPED.has(name) && !(keepUpgrade && name === "upgrade")) continue;
    if (name.startsWith("cf-")) continue;
    headers.set(name, value);
  }
  headers.set("X-Run-Id", runId);
  return headers;
}

/** The gateway's own query parameters, never passed to the app. */
const OURS = new Set(["webhookEndpoint", "async"]);
export const isGatewayParam = (name: string) => OURS.has(name);

/** The deployment's origin with the caller's query parameters (but ours) appended. */
export function upstreamUrl(originUrl: string, query: URLSearchParams | null): string {
  if (query === null) return originUrl;
  const url = new URL(originUrl);
  for (const [name, value] of query) {
    if (!OURS.has(name)) url.searchParams.append(name, value);
  }
  return url.href;
}

/** Reads a body up to `max` bytes; `null` when it is larger (the rest is not read). */
export async function readLimited(body: ReadableStream<Uint8Array> | null, max: number): Promise<Uint8Array | null> {
  if (!body) return new Uint8Array();
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

export interface UpstreamAnswer {
  status: number;
  /** The upstream's JSON text, verified to parse; `null` for an empty body. */
  json: string;
  runTimeMs: number;
}


/** Calls the upstream and returns its JSON answer; a 502 or 504 problem (with `run_id`) when it fails. */
export async function callUpstream(
  deps: Deps,
  target: string,
  init: Pick<RequestInit, "method" | "headers" | "body">,
  runId: string,
  timeoutMs: number,
  /** Ends the call early (the caller hung up long ago); it then fails as a timeout would. */
  cancel?: AbortSignal,
): Promise<UpstreamAnswer> {
  const meta = { extensions: { run_id: runId }, headers: { "X-Run-Id": runId } };
  const started = Date.now();
  // A timer of our own, cleared once the answer is read: `AbortSignal.timeout` would leave one pending
  // for the whole timeout after every run.
  const controller = new AbortController();
  const { signal } = controller;
  const timer = setTimeout(() => controller.abort(new DOMException(`No answer within ${timeoutMs} ms`, "TimeoutError")), timeoutMs);
  const onCancel = () => controller.abort(cancel?.reason);
  cancel?.addEventListener("abort", onCancel, { once: true });
  let response: Response;
  let raw: string | null;
  try {
    response = await deps.outbound.fetch(new Request(target, { ...init, signal, redirect: "manual" }));
    const length = response.headers.get("content-length");
    const declared = length === null ? null : Number(length);
    if (declared !== null && declared > RUN_RESPONSE_MAX_BYTES) {
      await response.body?.cancel().catch(() => undefined);
      raw = null;
    } else if (declared !== null && Number.isFinite(declared)) {
      // The common case, a declared length within the limit: the runtime reads it in one go, far
      // cheaper than a chunk loop in JavaScript (the hot path's largest cost in the benchmark).
      raw = await response.text();
    } else {
      const bytes = await readLimited(response.body, RUN_RESPONSE_MAX_BYTES);
      raw = bytes === null ? null : new TextDecoder().decode(bytes);
    }
  } catch (error) {
    if (isTimeout(error) || signal.aborted) {
      throw new ApiError("gateway_timeout", `The app did not answer within ${timeoutMs} ms.`, meta);
    }
    throw new ApiError("bad_gateway", "The app could not be reached.", { ...meta, cause: error });
  } finally {
    clearTimeout(timer);
    cancel?.removeEventListener("abort", onCancel);
  }
  if (raw === null) throw new ApiError("bad_gateway", `The app's answer is larger than ${RUN_RESPONSE_MAX_BYTES} bytes.`, meta);
  const text = raw.trim();
  if (text !== "") {
    try {
      JSON.parse(text);
    } catch {
      throw new ApiError("bad_gateway", `The app answered ${response.status} with a body that is not JSON.`, meta);
    }
  }
  return { status: response.status, json: text === "" ? "null" : text, runTimeMs: Date.now() - started };
}

/** The envelope, spliced around the upstream's own JSON text so `result` keeps its exact bytes. */
export function envelope(runId: string, answer: UpstreamAnswer, at: Date): string {
  return `{"run_id":${JSON.stringify(runId)},"result":${answer.json},"run_time_ms":${answer.runTimeMs},"timestamp":${JSON.stringify(at.toISOString())}}`;
}

// Statuses whose responses cannot carry a body: the envelope always has one.
const NULL_BODY = new Set([204, 205, 304]);
export const callerStatus = (upstream: number) => (NULL_BODY.has(upstream) || upstream < 200 || upstream > 599 ? 200 : upstream);
