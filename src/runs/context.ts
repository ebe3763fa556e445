import type { AdmittedRun } from "./admitted";

/**
 * One run as its stages see it once it has an id: made once by its owner from the admitted run
 * (`contextOf`: the Worker, the keeper, the queue consumer) and handed down to the call and the answer,
 * never rebuilt between them.
 */
export interface RunContext {
  runId: string;
  runtime: "cortex" | "custom";
  /** The caller's `Accept`, as sent to the app: whether the caller asked for a stream. */
  acceptHeader: string | null;
  /** The request that started the run, quoted in its problems. */
  requestId: string;
  now: () => Date;
  limits: CallLimits;
}

/** How long the app may take, and stay silent. */
export interface CallLimits {
  /** To send its response headers (`RUN_TIMEOUT_MS`; an async run's `ASYNC_RUN_TIMEOUT_MS`). */
  headersMs: number;
  /** Between two chunks of its body (`RUN_STREAM_IDLE_MS`). */
  idleMs: number;
}

/** The context of admitted run `run`, on its owner's clock `now`. */
export const contextOf = (run: AdmittedRun, now: () => Date): RunContext => ({
  runId: run.runId,
  runtime: run.runtime,
  acceptHeader: run.acceptHeader,
  requestId: run.requestId,
  now,
  limits: run.limits,
});
