import { ApiError } from "../platform/errors";
import type { Scope } from "../platform/scope";

/**
 * The app's answer to a WebSocket upgrade. A redirect is not followed (`redirect: "manual"`: the
 * caller's key and headers must not travel to wherever the app points), so it arrives as a non-101
 * and is refused; a handshake that does not finish within the run timeout is a 504, not a hung request.
 */
export async function webSocketHandshake(scope: Scope, target: string, headers: Headers, runId: string): Promise<Response> {
  const timeoutMs = scope.config.runTimeoutMs;
  try {
    return await scope.deps.outbound.fetch(new Request(target, { headers, redirect: "manual", signal: AbortSignal.timeout(timeoutMs) }));
  } catch (error) {
    if (error instanceof DOMException && (error.name === "TimeoutError" || error.name === "AbortError")) {
      throw new ApiError("gateway_timeout", `The app did not finish the WebSocket handshake within ${timeoutMs} ms.`, {
        extensions: { run_id: runId },
        headers: { "X-Run-Id": runId },
      });
    }
    throw error;
  }
}
