import type { AsyncRun } from "../db/schema";
import type { RunBody } from "./bodies";
import type { AdmittedMode } from "./admitted";
import type { AppRequest } from "./call";
import { appRequestHeaders } from "./headers";
import { appUrl } from "./path";

/**
 * The app's request, built in this one place for every mode: a synchronous run calls it at once, a waited
 * run's keeper calls it (it crosses to the keeper as a `Request`: `onWire`/`offWire`), an async run stores
 * it at acceptance and its queue consumer calls it as stored (`storedAppRequest`), a WebSocket run passes
 * the caller's upgrade with it. So the app sees the same URL, method, headers and body for the same
 * caller's request whichever way the caller asked for the run (test/workers/app-request.test.ts).
 */

/**
 * `{origin_url}/{path}` with the caller's query (but the gateway's own parameters), the caller's headers
 * (but its credentials, `headers.ts`), `X-Run-Id`, and the body as admitted. An async or waited run's
 * `Idempotency-Key` is the gateway's (it names the run: `async/accept.ts`, `wait/keeper.ts`), so the
 * app does not get it; a WebSocket run keeps `Upgrade`.
 */
export function appRequestOf(
  request: Request,
  run: {
    runId: string;
    appPath: string;
    originUrl: string;
    runtime: "cortex" | "custom";
    query: URLSearchParams | null;
    body: RunBody;
    kind: AdmittedMode["kind"];
  },
): AppRequest {
  const { runId, body, kind } = run;
  const webSocket = kind === "websocket";
  const headers = appRequestHeaders(request, runId, webSocket);
  if (kind === "async" || kind === "wait") headers.delete("idempotency-key");
  const url = appUrl(run.originUrl, run.appPath, run.query);
  if (run.runtime === "cortex" && !webSocket) {
    // A function's arguments are JSON, and so is the answer the envelope needs, unless the caller asked otherwise.
    if (body.kind === "bytes" && !headers.has("content-type")) headers.set("Content-Type", "application/json");
    if (!headers.has("accept")) headers.set("Accept", "application/json");
  }
  if (body.kind === "stream")
    return { url, method: request.method, headers, body: body.stream, runId, bodyLimit: body.limit };
  return { url, method: request.method, headers, body: body.kind === "bytes" ? body.bytes : null, runId };
}

/** An async run's app request as its row keeps it (`appRequestOf`'s, stored at acceptance), for its consumer. */
export function storedAppRequest(
  run: Pick<AsyncRun, "id" | "appUrl" | "method" | "requestHeaders">,
  body: Uint8Array | null,
): AppRequest {
  const headers = new Headers(JSON.parse(run.requestHeaders) as [string, string][]);
  return { url: run.appUrl, method: run.method, headers, body, runId: run.id };
}

/** A waited run's app request as it crosses to its keeper (RPC): a `Request` (its body read whole by then). */
export const onWire = (appRequest: AppRequest): Request =>
  new Request(appRequest.url, { method: appRequest.method, headers: appRequest.headers, body: appRequest.body });

/** The keeper's side of `onWire`: the same app request. */
export const offWire = (request: Request, runId: string): AppRequest => ({
  url: request.url,
  method: request.method,
  headers: request.headers,
  body: request.body,
  runId,
});

/**
 * The app's path an async run's outcome names (`run`, `v1/chat/completions`, no query): kept in its row
 * since acceptance (`app_path`); a row from before that column reads it back from its stored `appUrl`,
 * less the origin's base path when the app's deployment is still known.
 */
export function appPathOfRun(run: Pick<AsyncRun, "appPath" | "appUrl">, originUrl: string | null): string {
  if (run.appPath !== null) return run.appPath;
  const path = new URL(run.appUrl).pathname;
  const base = originUrl === null ? null : new URL(originUrl).pathname.replace(/\/+$/, "");
  return (base !== null && path.startsWith(`${base}/`) ? path.slice(base.length + 1) : path.replace(/^\/+/, "")) || "/";
}
