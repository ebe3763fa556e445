import type { Scope } from "../platform/scope";
import type { AdmittedRun } from "./admit";
import type { Answered } from "./answer";
import type { BodyEnd } from "./call";
import { CLIENT_CLOSED, type OutcomePort, problemOutcome, type RunOutcome, type RunStart } from "./outcome";

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
  /** Hands the outcome on, if nothing did before. */
  ended(outcome: RunOutcome): void;
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
  handedOff(): void;
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
  let done = false;
  let calledAt: number | null = null;
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
  function onHangUp() {
    if (done || webhook()) return;
    const { acceptedAt, ...facts } = start;
    close();
    outcomes.ended(scope, {
      ...facts,
      status: CLIENT_CLOSED,
      ending: "hung_up",
      failure: null,
      times: {
        acceptedAt,
        calledAt,
        answeredAt: null,
        firstByteAt: null,
        handedOverAt: null,
        endedAt: clock(),
      },
      bytesIn: bytesIn(),
      bytesOut: 0,
      webhook: webhook(),
    });
  }
  if (signal?.aborted) queueMicrotask(onHangUp);
  else signal?.addEventListener("abort", onHangUp, { once: true });
  return {
    ended(outcome) {
      if (done) return;
      done = true;
      // Handed on before the hold is let go: what the port starts joins `waitUntil` while it is held.
      outcomes.ended(scope, outcome);
      close();
    },
    calling() {
      calledAt = clock();
    },
    answered() {
      signal?.removeEventListener("abort", onHangUp);
      release();
      if (signal?.aborted) holdAgain();
      else signal?.addEventListener("abort", holdAgain, { once: true });
    },
    handedOff: close,
    hungUp: () => signal?.aborted === true,
  };
}

/** The parts of an outcome whose answer was the app's (`status`), before its bytes are counted. */
export function answeredOutcome(
  start: RunStart,
  status: number,
  at: { calledAt: number; answeredAt: number; endedAt: number; firstByteAt?: number | null },
): Omit<RunOutcome, "bytesIn" | "bytesOut" | "webhook"> {
  const { acceptedAt, ...facts } = start;
  return {
    ...facts,
    status,
    ending: "answered",
    failure: status >= 400 ? { by: "app", status } : null,
    times: {
      acceptedAt,
      calledAt: at.calledAt,
      answeredAt: at.answeredAt,
      firstByteAt: at.firstByteAt ?? null,
      handedOverAt: null,
      endedAt: at.endedAt,
    },
  };
}

/** How a passed-through answer's body ended, as the run's ending and the gateway's failure, if any. */
export const BODY_ENDS: Record<BodyEnd, { ending: RunOutcome["ending"]; code: string | null }> = {
  done: { ending: "answered", code: null },
  cancelled: { ending: "hung_up", code: null },
  idle: { ending: "timeout", code: "gateway_timeout" },
  broken: { ending: "unreachable", code: "bad_gateway" },
};

/** The caller's body as it reached the app: read whole, or counted as it flowed. */
export function bytesIn({ body }: AdmittedRun): number {
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
  start: RunStart,
  admitted: AdmittedRun,
  answered: Answered,
  clock: (wall?: number) => number,
  deadline?: AbortSignal,
): void {
  end.answered();
  const webhook = admitted.webhook !== null;
  const { call, response } = answered;
  if (call === null) {
    // The app gave no answer: the gateway's problem is the caller's.
    end.ended(
      problemOutcome(
        start,
        answered.problem!,
        {
          calledAt: answered.calledAt === null ? null : clock(answered.calledAt),
          endedAt: clock(),
          hungUp: end.hungUp(),
        },
        { bytesIn: bytesIn(admitted), bytesOut: answered.size ?? 0, webhook },
      ),
    );
    return;
  }
  const at = { calledAt: clock(call.startedAt), answeredAt: clock(call.answeredAt) };
  if (answered.size !== null) {
    const outcome = answeredOutcome(start, response.status, { ...at, endedAt: clock() });
    if (end.hungUp()) outcome.ending = "hung_up";
    end.ended({ ...outcome, bytesIn: bytesIn(admitted), bytesOut: answered.size, webhook });
    return;
  }
  const { tally } = call;
  void tally.ended.then((how) => {
    // A cancelled answer is the caller gone: the runtime may cancel the body before it aborts
    // `request.signal` (so under `wrangler dev`), and nothing else of ours cancels it.
    // The run's deadline ends a body as a hang-up would (its call cancelled): it is the deadline's end.
    const { ending, code } =
      deadline?.aborted === true && how !== "done"
        ? { ending: "deadline" as const, code: "run_deadline" }
        : BODY_ENDS[end.hungUp() && how !== "idle" ? "cancelled" : how];
    const outcome = answeredOutcome(start, response.status, {
      ...at,
      endedAt: clock(),
      firstByteAt: tally.firstByteAt === null ? null : clock(tally.firstByteAt),
    });
    outcome.ending = ending;
    if (code !== null) outcome.failure = { by: "gateway", code };
    end.ended({ ...outcome, bytesIn: bytesIn(admitted), bytesOut: tally.bytes, webhook });
  });
}
