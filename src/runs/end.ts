import type { Scope } from "../platform/scope";
import type { RunBody } from "./bodies";
import type { Answered } from "./answer";
import type { OutcomePort, RunStart } from "./outcome";
import { type RunEvent, runEvents } from "./run-events";

/**
 * The end of a run the Worker owns (a synchronous run, a WebSocket's handshake): its one outcome,
 * handed to the port once, whichever end comes first.
 *
 * Cloudflare cancels a request's pending work when its caller hangs up: a continuation of the run
 * waiting on the app would never resume, and the run would leave no outcome. So the end is held in
 * `waitUntil` from the run's acceptance (the platform lets it finish within 30 s of the hang-up), and
 * a hang-up before the answer is the run's end by itself (`hung_up`, status 499, nobody's failure),
 * unless a webhook carries the run on (its grace, `hang-up.ts`): then the run's own end says what came.
 * Once the answer is the caller's, its body's end is the run's (`endWhenAnswered`).
 */
export interface RunEnd {
  /** Records what happened to the run (`run-events.ts`). */
  record(event: RunEvent): void;
  /** Ends the run now with `bytesOut` of answer, its outcome folded from its events, if nothing ended it before. */
  ended(bytesOut: number): void;
  /** The app's call is being sent now (a hang-up from here on says it was called). */
  calling(): void;
  /**
   * The answer is the caller's now (its headers are sent): a hang-up ends its body, which ends the run.
   * The hold is let go (an unread body would keep `waitUntil` until the idle limit), and taken again if
   * the caller leaves before the body's end: the runtime then cancels what the request waits on, and
   * the run's end that follows the body (its outcome, the record's flush) runs only under a pending
   * `waitUntil` (without it, a caller who left mid-stream left no record under `npm run dev`).
   */
  answered(): void;
  /** The run is no longer this invocation's to end (an accepted async run: its consumer's). */
  endsElsewhere(): void;
  /** Whether the caller has hung up. */
  hungUp(): boolean;
}

export function openEnd(
  scope: Scope,
  outcomes: OutcomePort,
  request: Request,
  start: RunStart,
  clock: () => number,
  bytesIn: () => number,
  webhook: () => boolean,
): RunEnd {
  const signal = request.signal as AbortSignal | undefined;
  const events = runEvents(start, (outcome) => outcomes.ended(scope, outcome));
  let done = false;
  let release = () => undefined as void;
  scope.ctx.waitUntil(new Promise<void>((resolve) => (release = resolve)));
  const close = () => {
    done = true;
    signal?.removeEventListener("abort", onHangUp);
    signal?.removeEventListener("abort", holdAgain);
    release();
  };
  function holdAgain() {
    if (!done) scope.ctx.waitUntil(new Promise<void>((resolve) => (release = resolve)));
  }
  const ended = (bytesOut: number) => {
    if (done) return;
    // Given to the port before the hold is let go: what the port starts joins `waitUntil` while it is held.
    events.ended({ at: clock(), bytesIn: bytesIn(), bytesOut, webhook: webhook() });
    close();
  };
  function onHangUp() {
    if (done || webhook()) return;
    events.record({ kind: "hung_up" });
    ended(0);
  }
  if (signal?.aborted) queueMicrotask(onHangUp);
  else signal?.addEventListener("abort", onHangUp, { once: true });
  return {
    record: (event) => events.record(event),
    ended,
    calling() {
      events.record({ kind: "called", at: clock() });
    },
    answered() {
      signal?.removeEventListener("abort", onHangUp);
      release();
      if (signal?.aborted) holdAgain();
      else signal?.addEventListener("abort", holdAgain, { once: true });
    },
    endsElsewhere: close,
    hungUp: () => signal?.aborted === true,
  };
}

/** The caller's body as it reached the app: read whole, or counted as it flowed. */
export function bytesIn({ body }: { body: RunBody }): number {
  if (body.kind === "bytes") return body.bytes.byteLength;
  return body.kind === "stream" ? body.limit.size() : 0;
}

/**
 * Ends a synchronous run once its answer has ended: at once for a whole answer (the envelope, a
 * problem), when the body ended for a passed-through one (read to its end, broken off, or the caller
 * gone). The wait for a body's end is the caller's stream, bounded by the stream's idle limit.
 */
export function endWhenAnswered(
  end: RunEnd,
  answered: Answered,
  clock: (wall?: number) => number,
  deadline?: AbortSignal,
): void {
  end.answered();
  const { call, response } = answered;
  const hungUp = () => {
    if (end.hungUp()) end.record({ kind: "hung_up" });
  };
  if (call === null) {
    // The app gave no answer: the gateway's problem is the caller's.
    if (answered.calledAt !== null) end.record({ kind: "called", at: clock(answered.calledAt) });
    end.record({ kind: "failed", problem: answered.problem! });
    hungUp();
    end.ended(answered.size ?? 0);
    return;
  }
  end.record({ kind: "called", at: clock(call.startedAt) });
  end.record({ kind: "answered", at: clock(call.answeredAt), status: response.status });
  if (answered.size !== null) {
    hungUp();
    end.ended(answered.size);
    return;
  }
  const { tally } = call;
  void tally.ended.then((how) => {
    // A cancelled answer is the caller gone: the runtime may cancel the body before it aborts
    // `request.signal` (so under `wrangler dev`), and nothing else of ours cancels it.
    // The run's deadline ends a body as a hang-up would (its call cancelled): it is the deadline's end.
    if (deadline?.aborted === true) end.record({ kind: "deadline" });
    hungUp();
    end.record({
      kind: "body_ended",
      how,
      firstByteAt: tally.firstByteAt === null ? null : clock(tally.firstByteAt),
    });
    end.ended(tally.bytes);
  });
}
