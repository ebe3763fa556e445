import { ApiError } from "../platform/errors";
import { runMeta } from "./call";
import { durationText } from "./preferences";

/**
 * A run's deadline (`Cancel-After`), counted from its acceptance, whoever owns the app's call: past it
 * the call is ended with the `run_deadline` problem (504), which is what the caller, the webhook and a
 * stored result then carry, and what the run's outcome ends with ("deadline"; a timeout in usage).
 */

/** The problem a run ends with when its deadline passed: before its call (never made) or during it. */
export const deadlinePassed = (runId: string, cancelAfterMs: number, called: boolean) =>
  new ApiError(
    "run_deadline",
    called
      ? `The run's Cancel-After (${durationText(cancelAfterMs)}) passed; the app's call was ended.`
      : `The run's Cancel-After (${durationText(cancelAfterMs)}) passed before its call started; the app was not called.`,
    runMeta(runId),
  );

export interface Deadline {
  /** Aborts when the deadline passes, its reason the `run_deadline` problem. */
  signal: AbortSignal;
  /** Clears the timer once the run has ended. */
  dispose(): void;
}

/**
 * The deadline of a run accepted `elapsedMs` ago with `Cancel-After` of `cancelAfterMs`, as a signal
 * that ends its call. It waits on `sleep` (the owner's `deps.sleep`, which tests move by hand);
 * `dispose` when the run ended first, so the signal never fires for a run that is over.
 */
export function deadlineOf(
  runId: string,
  cancelAfterMs: number,
  elapsedMs: number,
  sleep: (ms: number) => Promise<void>,
): Deadline {
  const controller = new AbortController();
  let live = true;
  void sleep(Math.max(0, cancelAfterMs - elapsedMs)).then(() => {
    if (live) controller.abort(deadlinePassed(runId, cancelAfterMs, true));
  });
  return {
    signal: controller.signal,
    dispose: () => {
      live = false;
    },
  };
}

/** `cancel` and the deadline's signal as one (either ends the call); `cancel` alone without a deadline. */
export const withDeadline = (cancel: AbortSignal, deadline: Deadline | null): AbortSignal =>
  deadline === null ? cancel : AbortSignal.any([cancel, deadline.signal]);
