import { ApiError } from "../../platform/errors";
import type { Scope } from "../../platform/scope";
import { type AppRequest, runMeta } from "../call";

/**
 * The app's answer to a WebSocket upgrade. A redirect is not followed (`redirect: "manual"`: the
 * caller's key and headers must not travel to wherever the app points), so it arrives as a non-101
 * and is refused; a handshake that does not finish within the run timeout is a 504, not a hung request.
 * Once open, the socket is not bounded by the run timeout.
 */
export async function webSocketHandshake(
  scope: Scope,
  appUrl: string,
  headers: Headers,
  runId: string,
): Promise<Response> {
  const timeoutMs = scope.config.runTimeoutMs;
  // A timer of our own, cleared once the app answered: the request's signal stays bound to the socket
  // it opens, so a signal that fires later (`AbortSignal.timeout`) would end every WebSocket at the
  // run timeout. The timeout bounds the handshake only; the socket lives as long as both sides keep it.
  const controller = new AbortController();
  const { signal } = controller;
  const timer = setTimeout(
    () => controller.abort(new DOMException(`No handshake within ${timeoutMs} ms`, "TimeoutError")),
    timeoutMs,
  );
  try {
    return await scope.deps.outbound.fetch(new Request(appUrl, { headers, redirect: "manual", signal }));
  } catch (error) {
    const facts = runMeta(runId);
    // workerd does not always reject with the signal's TimeoutError: an upgrade cut short by the abort
    // may surface as "Network connection lost". The signal says which it was.
    if (signal.aborted)
      throw new ApiError(
        "gateway_timeout",
        `The app did not finish the WebSocket handshake within ${timeoutMs} ms.`,
        facts,
      );
    // Any other failure is the app's (refused, reset), never the gateway's storage: a 502, not a 503.
    throw new ApiError(
      "bad_gateway",
      `The app's WebSocket handshake failed (${error instanceof Error ? error.name : "error"}).`,
      facts,
    );
  } finally {
    clearTimeout(timer);
  }
}

/** A WebSocket run: the caller's upgrade passed to the app at `{origin_url}/{path}` (`appRequestOf`); webhooks never apply. */
export async function webSocketRun(scope: Scope, appRequest: AppRequest): Promise<Response> {
  const { runId } = appRequest;
  const response = await webSocketHandshake(scope, appRequest.url, appRequest.headers, runId);
  if (response.status !== 101 || !response.webSocket) {
    await response.body?.cancel().catch(() => undefined);
    throw new ApiError(
      "bad_gateway",
      `The app refused the WebSocket upgrade (status ${response.status}).`,
      runMeta(runId),
    );
  }
  return new Response(null, { status: 101, webSocket: response.webSocket, headers: { "X-Run-Id": runId } });
}
