import type { BodyEnd } from "./call";
import {
  CLIENT_CLOSED,
  endingOfProblem,
  type RunEnding,
  type RunMode,
  type RunOutcome,
  type RunStart,
} from "./outcome";

/**
 * The one place a run ends: its owner (the Worker for a synchronous run or a WebSocket's handshake, the
 * keeper for a waited run, the consumer for an async one) records what happened to the run as events,
 * and `ended` folds them into its `RunOutcome`, once. The fold is pure: it reads no store and no clock;
 * the same events give the same outcome whatever the owner (`run-events.test.ts` holds every mode to it).
 */
export type RunEvent =
  /** Admission knew the mode for certain (a WebSocket asked `Prefer: wait` is a synchronous run). */
  | { kind: "admitted"; mode: RunMode }
  /** The app's call was sent (the first report counts). */
  | { kind: "called"; at: number }
  /** The app answered: its headers came, and `status` is what the caller gets (or the stored result carries). */
  | { kind: "answered"; at: number; status: number }
  /** A passed-through answer's body ended: how, and when its first byte crossed. */
  | { kind: "body_ended"; how: BodyEnd; firstByteAt: number | null }
  /** A waited run's caller stopped waiting: the run goes on, its caller's hang-up no longer ends it. */
  | { kind: "handed_over"; at: number }
  /** The caller left while the run was theirs (not handed over). */
  | { kind: "hung_up" }
  /** The run's deadline (`Cancel-After`) ended its call. */
  | { kind: "deadline" }
  /** The gateway answered a problem of its own: the app gave no answer it could pass on, or the run was refused. */
  | { kind: "failed"; problem: { code: string; status: number } };

/** How the run's end was counted: when, and its bytes. */
export interface RunEnded {
  at: number;
  bytesIn: number;
  bytesOut: number;
  webhook: boolean;
}

/** How a passed-through answer's body ended, as the run's ending and the gateway's failure, if any. */
const BODY_ENDS: Record<BodyEnd, { ending: RunEnding; code: string | null }> = {
  done: { ending: "answered", code: null },
  cancelled: { ending: "hung_up", code: null },
  idle: { ending: "timeout", code: "gateway_timeout" },
  broken: { ending: "unreachable", code: "bad_gateway" },
};

const first = <K extends RunEvent["kind"]>(events: readonly RunEvent[], kind: K) =>
  events.find((event): event is Extract<RunEvent, { kind: K }> => event.kind === kind);

/**
 * The run's outcome from its events. The gateway's problem is the answer when there is one; else the
 * app's answer, whole or passed through (its body's end says how it ended); else the caller left before
 * any answer (499, nobody's failure). A caller who left before the end makes it `hung_up`, unless the
 * run was handed over (its caller no longer waited) or its answer's body ran idle.
 */
export function foldOutcome(start: RunStart, events: readonly RunEvent[], end: RunEnded): RunOutcome {
  const { acceptedAt, ...facts } = start;
  const admitted = first(events, "admitted");
  const called = first(events, "called");
  const answered = first(events, "answered");
  const body = first(events, "body_ended");
  const handedOver = first(events, "handed_over");
  const failed = first(events, "failed");
  const hungUp = handedOver === undefined && first(events, "hung_up") !== undefined;
  const deadline = first(events, "deadline") !== undefined;
  let status: number;
  let ending: RunEnding;
  let failure: RunOutcome["failure"];
  if (failed !== undefined) {
    status = failed.problem.status;
    ending = hungUp ? "hung_up" : endingOfProblem(failed.problem);
    failure = { by: "gateway", code: failed.problem.code };
  } else if (answered !== undefined) {
    status = answered.status;
    const how =
      body === undefined
        ? { ending: hungUp ? ("hung_up" as const) : ("answered" as const), code: null }
        : deadline && body.how !== "done"
          ? { ending: "deadline" as const, code: "run_deadline" }
          : BODY_ENDS[hungUp && body.how !== "idle" ? "cancelled" : body.how];
    ending = how.ending;
    failure = how.code !== null ? { by: "gateway", code: how.code } : status >= 400 ? { by: "app", status } : null;
  } else {
    status = CLIENT_CLOSED;
    ending = "hung_up";
    failure = null;
  }
  return {
    ...facts,
    mode: admitted?.mode ?? facts.mode,
    status,
    ending,
    failure,
    times: {
      acceptedAt,
      calledAt: called?.at ?? null,
      answeredAt: answered?.at ?? null,
      firstByteAt: body?.firstByteAt ?? null,
      handedOverAt: handedOver?.at ?? null,
      endedAt: end.at,
    },
    bytesIn: end.bytesIn,
    bytesOut: end.bytesOut,
    webhook: end.webhook,
  };
}

/** One run's events as its owner records them, and its one end. */
export interface RunEvents {
  record(event: RunEvent): void;
  /** Ends the run: its outcome, folded from its events and given to `hand` (the owner’s record of it); false when it had ended before. */
  ended(end: RunEnded): boolean;
}

/** The events of the run that starts as `start`; its outcome goes to `hand` once. */
export function runEvents(start: RunStart, hand: (outcome: RunOutcome) => void): RunEvents {
  const events: RunEvent[] = [];
  let done = false;
  return {
    record(event) {
      if (!done) events.push(event);
    },
    ended(end) {
      if (done) return false;
      done = true;
      hand(foldOutcome(start, events, end));
      return true;
    },
  };
}
