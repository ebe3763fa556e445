import type { AsyncRun } from "../../db/schema";
import type { Scope } from "../../platform/scope";
import type { PendingDelivery } from "../../webhooks/enqueue";
import type { RunAnswer } from "../answer";
import { tellIfFollowed } from "../async/followers";
import { endingOf, problemEnding } from "../async/lifecycle";
import { runJson } from "../async/resource";
import type { StoredEnding } from "../async/store";
import type { RunRows } from "../async/rows";
import type { AdmittedRun } from "../admitted";

/**
 * A waited run's row in its keeper (`async_runs`, as an async run's): written when the run is handed
 * over, so from then on it is read, followed and purged as any async run is (the same status URL, 7
 * days); never on the answered path. The keeper is its only writer: its claim is `KEEPER_CLAIM`, which
 * no queue message ever has, so the async consumer and a cancel (queued runs only) never touch it; a
 * keeper that lost the call ends it from its record (`endInterrupted`), and its sweep never takes a run
 * that has one (runs/async/sweep.ts).
 */

export const KEEPER_CLAIM = "keeper";

/** The moments the row keeps: the call (`started_at`) and the hand-over (`null` for a run never handed over). */
export interface RowTimes {
  calledAt: number;
  handedOverAt: number | null;
}

/** The row of a waited run, as written at its hand-over: nothing of its request is kept (it is called already). */
function rowOf(run: AdmittedRun, appUrl: string, pending: PendingDelivery | null, at: RowTimes) {
  return {
    id: run.runId,
    projectId: run.projectId,
    appName: run.appName,
    caller: run.caller,
    status: "running" as AsyncRun["status"],
    method: run.method,
    // Without its query: an ended run forgets it anyway (store.ts), and this one is called already.
    appUrl: appUrl.split("?")[0]!,
    appPath: run.appPath,
    requestHeaders: "[]",
    requestBody: null,
    requestInR2: false,
    requestBodyEncoding: "utf8" as const,
    requestId: run.requestId,
    idempotencyKey: null,
    requestHash: "",
    webhookEndpoint: pending?.endpoint ?? null,
    webhookSecret: null,
    // The delivery was recorded before the call and is the keeper's to send: the sweep never hands it over again.
    deliveryId: pending?.id ?? null,
    claimedBy: KEEPER_CLAIM,
    createdAt: new Date(run.acceptedAt),
    startedAt: new Date(at.calledAt),
    handedOverAt: at.handedOverAt === null ? null : new Date(at.handedOverAt),
    mode: "wait" as const,
    // Its keeper holds the run: the row is its state and result, never executed from.
    admitted: null,
    deadlineAt: run.cancelAfterMs === null ? null : new Date(run.acceptedAt + run.cancelAfterMs),
  };
}

/** The hand-over: the run's row, `running` since its call. `false` when the row was there already. */
export async function insertHandedOver(
  rows: RunRows,
  run: AdmittedRun,
  appUrl: string,
  pending: PendingDelivery | null,
  at: RowTimes,
): Promise<boolean> {
  return rows.insert(rowOf(run, appUrl, pending, at));
}

/**
 * Ends the run's row with `ending` (`running → succeeded | failed`) and tells its followers, with the
 * run as it now is (`result`: its stored result's text). `false` when the row had ended already.
 */
async function endRow(
  scope: Scope,
  rows: RunRows,
  row: ReturnType<typeof rowOf>,
  ending: StoredEnding,
  result: string | null,
): Promise<boolean> {
  const ended = await rows.end(row.id, "running", KEEPER_CLAIM, ending);
  const run: AsyncRun = { ...row, ...ending, resultType: ending.resultType, followed: true };
  tellIfFollowed(scope, row.id, ending.status, ended?.followed, () => runJson(run, result));
  return ended !== undefined;
}

/** Ends the handed-over run with its answer, stored as an async run's (large results in R2). */
export async function endHandedOver(
  scope: Scope,
  rows: RunRows,
  run: AdmittedRun,
  appUrl: string,
  pending: PendingDelivery | null,
  at: RowTimes & { endedAt: number },
  answer: RunAnswer,
): Promise<{ ended: boolean; ending: StoredEnding }> {
  const ending = await endingOf(scope.env, run.runId, answer, new Date(at.endedAt));
  const ended = await endRow(scope, rows, rowOf(run, appUrl, pending, at), ending, answer.text);
  return { ended, ending };
}

/**
 * Ends a run whose keeper was reset mid-call (the platform restarted or evicted it): a handed-over
 * run's row goes `running → failed`; a run that was never handed over (its caller was still waiting
 * when everything stopped) gets its row now, already ended, so every run the app saw has a state.
 */
export async function endInterrupted(
  scope: Scope,
  rows: RunRows,
  run: AdmittedRun,
  appUrl: string,
  pending: PendingDelivery | null,
  at: RowTimes & { endedAt: number },
  text: string,
  message: string,
): Promise<boolean> {
  const ending = problemEnding("run_interrupted", text, "interrupted", message, new Date(at.endedAt));
  const row = rowOf(run, appUrl, pending, at);
  // A row written at hand-over (whatever the keeper's record had time to say) ends here; one already
  // ended is left as it is.
  if (await endRow(scope, rows, row, ending, text)) return true;
  if (at.handedOverAt !== null) return false;
  return rows.insert({ ...row, ...ending });
}
