import { PROBLEM_CONTENT_TYPE } from "../../platform/errors";
import type { Scope } from "../../platform/scope";
import type { PendingDelivery } from "../../webhooks/enqueue";
import type { RunAnswer } from "../answer";
import { endingOf } from "../async/lifecycle";
import { byteLength } from "../async/payloads";
import { tellIfFollowed } from "../async/followers";
import { type Ending, endRun, insertRun } from "../async/store";
import type { KeptRun } from "./message";

/**
 * A waited run's row in D1 (`async_runs`, as an async run's): written when the run is handed over, so
 * from then on it is read, followed and purged as any async run is (the same status URL, 7 days); never
 * on the answered path. The keeper is its only writer: its claim is `KEEPER_CLAIM`, which no queue
 * message ever has, so the async consumer and a cancel (queued runs only) never touch it; the cron ends
 * it `interrupted` only if its keeper is gone for good (runs/async/sweep.ts, 16 minutes).
 */

export const KEEPER_CLAIM = "keeper";

/** What the row keeps of the request: nothing a reader needs once the app is called (the row is written after). */
function rowOf(run: KeptRun, target: string, pending: PendingDelivery | null) {
  return {
    id: run.runId,
    projectId: run.projectId,
    appName: run.appName,
    caller: run.caller,
    method: run.method,
    // Without its query: an ended run forgets it anyway (store.ts), and this one is called already.
    target: target.split("?")[0]!,
    requestHeaders: "[]",
    requestBody: null,
    requestInR2: false,
    requestId: run.requestId,
    idempotencyKey: null,
    requestHash: "",
    webhookEndpoint: pending?.endpoint ?? null,
    webhookSecret: null,
    // The delivery was recorded before the call and is the keeper's to send: the sweep never hands it over again.
    deliveryId: pending?.id ?? null,
    claimedBy: KEEPER_CLAIM,
    createdAt: new Date(run.acceptedAt),
    mode: "wait" as const,
    deadlineAt: run.cancelAfterMs === null ? null : new Date(run.acceptedAt + run.cancelAfterMs),
  };
}

/** The hand-over: the run's row, `running` since its call. `false` when the row was there already (a retried hand-over). */
export async function insertHandedOver(
  scope: Scope,
  run: KeptRun,
  target: string,
  pending: PendingDelivery | null,
  at: { calledAt: number; handedOverAt: number },
): Promise<boolean> {
  return insertRun(scope.db, {
    ...rowOf(run, target, pending),
    status: "running",
    startedAt: new Date(at.calledAt),
    handedOverAt: new Date(at.handedOverAt),
  });
}

/** Ends the handed-over run with its answer, stored as an async run's (large results in R2). */
export async function endHandedOver(
  scope: Scope,
  runId: string,
  answer: RunAnswer,
  at: number,
): Promise<{ ended: boolean; ending: Ending }> {
  const ending = await endingOf(scope.env, runId, answer, new Date(at));
  const ended = await endRun(scope.db, runId, "running", KEEPER_CLAIM, ending);
  tellIfFollowed(scope, runId, ending.status, ended?.followed);
  return { ended: ended !== undefined, ending };
}

/** The ending of a run its keeper lost mid-call: the problem text as its result, `interrupted` as its error. */
function interruptedEnding(text: string, at: number, message: string): Ending {
  return {
    status: "failed",
    resultStatus: 502,
    resultType: PROBLEM_CONTENT_TYPE,
    resultBytes: byteLength(text),
    result: text,
    resultInR2: false,
    errorCode: "interrupted",
    errorMessage: message,
    finishedAt: new Date(at),
  };
}

/**
 * Ends a run whose keeper was reset mid-call (the platform restarted or evicted it): a handed-over
 * run's row goes `running → failed`; a run that was never handed over (its caller was still waiting
 * when everything stopped) gets its row now, already ended, so every run the app saw has a state.
 */
export async function endInterrupted(
  scope: Scope,
  run: KeptRun,
  target: string,
  pending: PendingDelivery | null,
  at: { calledAt: number; handedOverAt: number | null; endedAt: number },
  text: string,
  message: string,
): Promise<boolean> {
  const ending = interruptedEnding(text, at.endedAt, message);
  // A row written at hand-over (whatever the keeper's record had time to say) ends here; one already
  // ended is left as it is.
  const ended = await endRun(scope.db, run.runId, "running", KEEPER_CLAIM, ending);
  tellIfFollowed(scope, run.runId, ending.status, ended?.followed);
  if (ended) return true;
  if (at.handedOverAt !== null) return false;
  return insertRun(scope.db, {
    ...rowOf(run, target, pending),
    ...ending,
    startedAt: new Date(at.calledAt),
    handedOverAt: null,
  });
}
