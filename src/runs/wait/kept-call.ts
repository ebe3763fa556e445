import { ApiError } from "../../platform/errors";
import type { Scope } from "../../platform/scope";
import { handToLane, type PendingDelivery } from "../../webhooks/enqueue";
import {
  collectAnswer,
  envelopeAnswer,
  type EnvelopeAnswer,
  envelopes,
  failureAnswer,
  passThrough,
  type RunAnswer,
} from "../answer";
import { type AppCall, type AppRequest, callApp, runMeta } from "../call";
import { contextOf } from "../context";
import { deadlineOf, withDeadline } from "../deadline";
import type { RunOutcome } from "../outcome";
import { runEvents } from "../run-events";
import { byteLength } from "../async/payloads";
import { endHandedOver, insertHandedOver } from "./handed-over";
import type { RunRows } from "../async/rows";
import type { KeeperAnswer, WholeAnswer } from "./message";
import { type AdmittedRunIn, startOfAdmitted } from "../admitted";

/**
 * One waited run's app call, as its keeper makes it: the call starts at once; the caller gets the
 * answer if it is ready within the wait (`Prefer: wait=N`, counted from acceptance), else the run is
 * handed over (its row written, the caller answered 202) and its answer stored as an async run's. The
 * stages are the synchronous run's own (`callApp`, then `passThrough` or `envelopeAnswer`), called here
 * rather than through `callAndAnswer` only because the wait is raced between them.
 *
 * What "ready" is: a passed-through answer when its headers come (a stream whose headers came within
 * the wait is an answer); the envelope once the app's whole body is read and checked, since its
 * headers are the envelope's; a problem (502, 504, 413, 504 `run_deadline`) when it is known.
 */

type Phase = "waiting" | "answered" | "handing_over" | "handed_over";

/** The longest a handed-over run's call may take, from its start: `ASYNC_RUN_TIMEOUT_MS`, as an async run's. */
const handedOverLimit = (scope: Scope) => scope.config.asyncRunTimeoutMs;

export interface KeptCall {
  /** The caller's answer, or the hand-over: what the keeper's `run` returns. */
  toCaller: Promise<KeeperAnswer>;
  /** Resolves once the run has ended and its outcome is given to the port (its storage may then go). */
  ended: Promise<void>;
  /** The caller hung up: while waiting, that is the hand-over; during an answer, its ending. */
  callerLeft(): void;
  /**
   * A retry under the run's `Idempotency-Key` joins it, waiting until `until` (`Date.now()`): a run
   * still waiting is handed over at once (from then on its answer is stored, so every request of the
   * key can have it); a handed-over run's stored answer if it ends by then, else the hand-over.
   */
  join(until: number): Promise<Joined>;
  /** How it ended, once `ended` resolved: its answer went to its caller, or was stored with this status. */
  endedAs(): RunKeyStatus;
}

/** A key's run as its keeper knows it: in flight, answered to the caller who waited, or stored (its status). */
export type RunKeyStatus = "running" | "answered" | "succeeded" | "failed";

/** What a retry that joined a run gets (`join`). */
export type Joined =
  /** The run ended within the retry's wait: its stored answer (the status URL's `result`). */
  | { kind: "whole"; answer: WholeAnswer }
  /** The run goes on past the retry's wait: the retry gets the run resource (202). */
  | { kind: "handed_over" }
  /** The run's answer went to the request that waited for it: nothing of it is kept. */
  | { kind: "answered" };

export interface KeepParts {
  scope: Scope;
  /** The keeper's rows of runs: a handed-over run's row is kept there. */
  rows: RunRows;
  run: AdmittedRunIn<"wait">;
  /** The Worker's wall milliseconds from the run's acceptance to the moment it sent the run here. */
  sentAfterMs: number;
  appRequest: AppRequest;
  pending: PendingDelivery | null;
  /** The run's clock (epoch ms), continued from the Worker's at acceptance; `at(wall)` places a `Date.now()`. */
  clock: (wall?: number) => number;
  /** Notes the hand-over in the keeper's storage once the row is written. */
  handedOver(at: number): void;
  /** The run's one outcome. */
  ended(outcome: RunOutcome): void;
}

/** Starts the app's call of `run` and keeps it to its end. */
export function keepCall(parts: KeepParts): KeptCall {
  const { scope, rows, run, sentAfterMs, appRequest, pending, clock } = parts;
  const { deps } = scope;
  const received = Date.now();
  const context = contextOf(run, () => new Date(clock()));
  const wait = run.mode.seconds;
  const sinceAcceptance = () => sentAfterMs + (Date.now() - received);
  const stop = new AbortController();
  const deadline =
    run.cancelAfterMs === null ? null : deadlineOf(run.runId, run.cancelAfterMs, sinceAcceptance(), deps.sleep);
  const signal = withDeadline(stop.signal, deadline);
  let phase: Phase = "waiting";
  let handedOverAt: number | null = null;
  let endedAs: RunKeyStatus = "running";
  let storedAnswer!: (answer: RunAnswer) => void;
  const stored = new Promise<RunAnswer>((resolve) => (storedAnswer = resolve));
  /** The caller's answer when the run could not be handed over (D1 refused its row). */
  let refusedAnswer: WholeAnswer | null = null;
  let answerCaller!: (answer: KeeperAnswer) => void;
  const toCaller = new Promise<KeeperAnswer>((resolve) => (answerCaller = resolve));
  const applied = (response: Response) => {
    response.headers.set("Preference-Applied", `wait=${wait}`);
    return response;
  };

  const calledAt = Date.now();
  const calling = callApp(deps, appRequest, run.limits, signal);

  const events = runEvents(startOfAdmitted(run), parts.ended);
  events.record({ kind: "called", at: clock(calledAt) });
  /** The run's one end, now, with `bytesOut` of answer. */
  const end = (bytesOut: number) =>
    events.ended({ at: clock(), bytesIn: run.bytesIn, bytesOut, webhook: pending !== null });
  /** The app's answer (`status`, at `answeredAt`), or the gateway's problem when it gave none. */
  function answeredWith(answer: { status: number; failure: ApiError | null }, answeredAt: number | null) {
    if (answer.failure === null && answeredAt !== null)
      events.record({ kind: "answered", at: clock(answeredAt), status: answer.status });
    else events.record({ kind: "failed", problem: answer.failure ?? { code: "bad_gateway", status: answer.status } });
  }

  /** Why the call ended early, when the keeper ended it (its deadline, the hand-over's limit). */
  const endedBy = (): ApiError | null => (signal.reason instanceof ApiError ? signal.reason : null);

  // Past the wait, or at a hang-up while waiting: the hand-over.
  const waitTimer = setTimeout(() => void handOver(), Math.max(0, wait * 1000 - sinceAcceptance()));
  let handingOver: Promise<boolean> | null = null;

  function handOver(): Promise<boolean> {
    if (phase !== "waiting") return handingOver ?? Promise.resolve(false);
    phase = "handing_over";
    clearTimeout(waitTimer);
    const at = clock();
    handingOver = insertHandedOver(rows, run, appRequest.url, pending, {
      calledAt: clock(calledAt),
      handedOverAt: at,
    })
      .then(() => {
        handedOverAt = at;
        phase = "handed_over";
        events.record({ kind: "handed_over", at });
        parts.handedOver(at);
        // Nobody waits any more: bounded as an async run's call is.
        const left = handedOverLimit(scope) - (Date.now() - calledAt);
        const limit = setTimeout(
          () =>
            stop.abort(
              new ApiError(
                "gateway_timeout",
                `The app did not finish within ${handedOverLimit(scope)} ms of its call.`,
                runMeta(run.runId),
              ),
            ),
          Math.max(0, left),
        );
        void ended.finally(() => clearTimeout(limit));
        answerCaller({ kind: "handed_over", status: "running" });
        return true;
      })
      .catch(() => {
        // Its store would not take the run (full, or failing): it cannot be handed over, so it is ended rather than lost unseen.
        const error = new ApiError(
          "service_unavailable",
          "The run could not be handed over (its store was unavailable); the app's call was ended. Retry the request.",
          { ...runMeta(run.runId), headers: { "Retry-After": "1", "X-Run-Id": run.runId } },
        );
        stop.abort(error);
        refusedAnswer = wholeOf(failureAnswer(error, run.requestId));
        answerCaller({ kind: "whole", answer: refusedAnswer });
        return false;
      });
    return handingOver;
  }

  /** The caller gets a whole answer (the envelope, a problem) within the wait. */
  async function answerWhole(answer: EnvelopeAnswer, answeredAt: number | null): Promise<void> {
    phase = "answered";
    endedAs = "answered";
    clearTimeout(waitTimer);
    answerCaller({ kind: "whole", answer: wholeOf(answer) });
    if (pending) await handToLane(scope, pending, answer.text);
    answeredWith(answer, answeredAt);
    end(byteLength(answer.text));
  }

  /** The caller gets the app's answer passed through, as it streams; the run ends with its body. */
  async function answerPassedThrough(call: AppCall): Promise<void> {
    phase = "answered";
    endedAs = "answered";
    clearTimeout(waitTimer);
    const { response, copy } = passThrough(call, context, pending !== null);
    answerCaller({ kind: "answered", response: applied(response) });
    const how = await call.tally.ended;
    const document = copy ? await copy : null;
    if (pending && document) await handToLane(scope, pending, document.text);
    answeredWith({ status: call.response.status, failure: null }, call.answeredAt);
    // The keeper's own reason to end the body (its deadline) says how it ended; else how the body did.
    if (endedBy()?.code === "run_deadline") events.record({ kind: "deadline" });
    const { firstByteAt } = call.tally;
    events.record({ kind: "body_ended", how, firstByteAt: firstByteAt === null ? null : clock(firstByteAt) });
    end(call.tally.bytes);
  }

  /** Nobody waits: the answer is stored as an async run's, and delivered to the webhook. */
  async function store(answer: RunAnswer, answeredAt: number | null): Promise<void> {
    if (!(await handingOver)) {
      // Not handed over after all (its store refused the row): the caller was told; the run ends with that.
      endedAs = "answered";
      const refused = new ApiError("service_unavailable", "The run could not be handed over.", runMeta(run.runId));
      answeredWith({ status: refused.status, failure: refused }, answeredAt);
      end(0);
      return;
    }
    const endedAt = clock();
    const { ending } = await endHandedOver(
      scope,
      rows,
      run,
      appRequest.url,
      pending,
      { calledAt: clock(calledAt), handedOverAt, endedAt },
      answer,
    );
    endedAs = ending.status;
    storedAnswer(answer);
    if (pending) await handToLane(scope, pending, answer.text);
    answeredWith(answer, answeredAt);
    end(ending.resultBytes);
  }

  const asProblem = (error: unknown): ApiError =>
    error instanceof ApiError
      ? error
      : new ApiError("bad_gateway", "The app's answer broke off.", { ...runMeta(run.runId), cause: error });

  const ended = (async () => {
    let call: AppCall;
    try {
      call = await calling;
    } catch (error) {
      const answer = failureAnswer(asProblem(error), run.requestId);
      if (phase === "waiting") return answerWhole(answer, null);
      return store(answer, null);
    }
    if (phase === "waiting" && !envelopes(call, context)) return answerPassedThrough(call);
    // An envelope is read whole before it is an answer: the wait may end while it is read.
    let answer: EnvelopeAnswer | RunAnswer;
    try {
      answer = envelopes(call, context) ? await envelopeAnswer(call, context) : await collectAnswer(call, context);
    } catch (error) {
      answer = failureAnswer(asProblem(error), run.requestId);
    }
    if (phase === "waiting" && "headers" in answer) return answerWhole(answer, call.answeredAt);
    return store(answer, call.answeredAt);
  })().finally(() => deadline?.dispose());

  return {
    toCaller,
    ended,
    callerLeft() {
      // While waiting, a hang-up is the hand-over; once the answer is the caller's, it ends the run.
      if (phase === "answered") events.record({ kind: "hung_up" });
      if (phase === "waiting") void handOver();
    },
    async join(until) {
      if (phase === "answered") return { kind: "answered" };
      if (phase === "waiting") void handOver();
      if (!(await handingOver)) return { kind: "whole", answer: refusedAnswer! };
      let timer: ReturnType<typeof setTimeout> | undefined;
      const answer = await Promise.race([
        stored,
        new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), Math.max(0, until - Date.now())))),
      ]);
      if (timer !== undefined) clearTimeout(timer);
      if (answer === null) return { kind: "handed_over" };
      return { kind: "whole", answer: wholeOf({ ...answer, headers: {} }) };
    },
    endedAs: () => endedAs,
  };
}

/** A whole answer as plain values (its failure's headers among its own). */
const wholeOf = (answer: EnvelopeAnswer): WholeAnswer => ({
  status: answer.status,
  text: answer.text,
  contentType: answer.contentType,
  headers: { ...answer.headers, ...answer.failure?.headers },
});
