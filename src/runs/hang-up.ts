import type { Deps } from "../platform/deps";

/**
 * Workers keep work passed to `waitUntil` alive for 30 s after the client hangs up, then end the
 * invocation. A run with a webhook is carried in `waitUntil`, so a caller who hangs up still gets
 * its delivery if the app answers within this; past it the run is cut short on purpose, while
 * there is still time to write why (`run_interrupted`), instead of being killed mid-write.
 */
export const RUN_AFTER_HANG_UP_MS = 25_000;

/**
 * A signal that fires `RUN_AFTER_HANG_UP_MS` after the caller disconnects (`request.signal`, with the
 * `enable_request_signal` compatibility flag); `dispose` once the run is over.
 */
export function cutShortAfterHangUp(request: Request, deps: Deps): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  let done = false;
  const onAbort = () => {
    void deps.sleep(RUN_AFTER_HANG_UP_MS).then(() => {
      if (!done)
        controller.abort(
          new DOMException("The caller hung up and the run outlived what the platform allows after it", "AbortError"),
        );
    });
  };
  const callerSignal = request.signal as AbortSignal | undefined;
  if (callerSignal?.aborted) onAbort();
  else callerSignal?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    dispose: () => {
      done = true;
      callerSignal?.removeEventListener("abort", onAbort);
    },
  };
}
