import type { AsyncRun } from "../../db/schema";
import type { Scope } from "../../platform/scope";
import { ApiError, problemBody, PROBLEM_CONTENT_TYPE, type ProblemCode, PROBLEMS } from "../../platform/errors";
import { handToLane, type PendingDelivery, pendingOf, preparePending, writePending } from "../../webhooks/enqueue";
import { logDbOf } from "../../webhooks/log";
import type { SealedSecret } from "../../webhooks/secret-box";
import { openableWebhookSecret } from "../webhook";
import type { RunAnswer } from "../answer";
import { appPathOfRun } from "../app-request";
import { byteLength, placePayload, readPayload, resultKey } from "./payloads";
import { type StoredEnding, type ResultDelivery, recordedDelivery } from "./store";
import type { RunRows } from "./rows";
import { logError } from "../../platform/log";
import { type OutcomePort, outcomePath, type RunStart } from "../outcome";
import { type RunEvents, runEvents } from "../run-events";
import { tellIfFollowed } from "./followers";
import { runJson } from "./resource";

/** Why a run that ended without an answer from its app ended: the `error.code` of the run. */
export type Unanswered = "interrupted" | "expired" | "deadline";

/** A run's `error.code` for the problems whose name says "run" twice: the run's deadline, its interruption. */
const RUN_ERROR_OF_PROBLEM: Record<string, string> = { run_deadline: "deadline", run_interrupted: "interrupted" };

/** The ending of a run whose app was called: `succeeded` exactly when a synchronous run would have answered 2xx. */
export async function endingOf(env: Env, runId: string, answer: RunAnswer, now: Date): Promise<StoredEnding> {
  const bytes = byteLength(answer.text);
  const placed = await placePayload(env, resultKey(runId), answer.text, bytes);
  // A passed-through answer that broke off is a failed run, whatever status it began with.
  const ok = answer.status >= 200 && answer.status < 300 && answer.failure === null;
  return {
    status: ok ? "succeeded" : "failed",
    resultStatus: answer.status,
    resultType: answer.contentType,
    resultBytes: bytes,
    result: placed.inline,
    resultInR2: placed.inR2,
    errorCode: ok
      ? null
      : answer.failure
        ? (RUN_ERROR_OF_PROBLEM[answer.failure.code] ?? answer.failure.code)
        : "upstream_status",
    errorMessage: ok ? null : (answer.failure?.message ?? `The app answered ${answer.status}.`),
    finishedAt: now,
  };
}

const UNANSWERED_DETAIL: Record<Unanswered, string> = {
  interrupted:
    "The run was interrupted: the worker running it stopped before the app's answer was stored. It is not run again.",
  expired: "The run waited in the queue too long and was never started. It is not run again.",
  deadline: "The run's Cancel-After passed while it was queued: it was never started, and the app was not called.",
};

/** The problem each kind of unanswered run carries: its deadline's (504), or an interruption's (502). */
const unansweredProblem = (why: Unanswered) => (why === "deadline" ? "run_deadline" : "run_interrupted");

/** The answer of a run that has none: the problem a caller would read, stored and delivered like any result. */
export function unansweredText(run: Pick<AsyncRun, "id" | "requestId">, why: Unanswered): string {
  const error = new ApiError(unansweredProblem(why), UNANSWERED_DETAIL[why], { extensions: { run_id: run.id } });
  return JSON.stringify(problemBody(error, run.requestId));
}

/**
 * The webhook delivery of a finished run's result, prepared but not written (`preparePending`): `null`
 * when the run has no webhook; `deliveryId: "none"` (no delivery) when its secret cannot be read.
 */
export async function resultDeliveryOf(
  scope: Scope,
  run: AsyncRun,
): Promise<(ResultDelivery & { pending: PendingDelivery | null }) | null> {
  if (!run.webhookEndpoint) return null;
  // Sealed under the run's id at admission (its own column); only a changed WEBHOOK_ENCRYPTION_KEY fails to open it.
  const opened = await openableWebhookSecret(scope, {
    runId: run.id,
    projectId: run.projectId,
    webhook: {
      endpoint: run.webhookEndpoint,
      secret: run.webhookSecret === null ? null : (JSON.parse(run.webhookSecret) as SealedSecret),
    },
  });
  if (opened === null) return { deliveryId: "none", row: null, pending: null };
  const { pending, row } = await preparePending(scope, {
    projectId: run.projectId,
    appName: run.appName,
    runId: run.id,
    endpoint: run.webhookEndpoint,
    secret: opened.secret,
  });
  return { deliveryId: pending.id, row, pending };
}

/**
 * Hands a finished run's stored answer to the webhook pipeline: one delivery, its body the result's
 * exact bytes; then the run records the delivery's id and forgets the secret. For a run ended without
 * its delivery (`endUnanswered`, or the cron's recovery); the consumer writes the delivery with the
 * run's end (`endRun` with a `ResultDelivery`) and only hands it on afterwards (`handToLane`).
 */
export async function handOnResult(scope: Scope, rows: RunRows, run: AsyncRun, text: string): Promise<void> {
  // A run whose delivery is on record already (a waited run's, recorded before its app was called) keeps
  // it: the result goes to that delivery if it was never attempted, never to a second one.
  if (run.deliveryId !== null && run.deliveryId !== "none") {
    await handOnAgain(scope, run, text);
    return;
  }
  const delivery = await resultDeliveryOf(scope, run);
  if (!delivery) return;
  if (delivery.pending && delivery.row) {
    const pending = await writePending(scope, { pending: delivery.pending, row: delivery.row });
    await handToLane(scope, pending, text);
  }
  await rows.deliveryNoted(run.id, delivery.deliveryId);
}

/**
 * The delivery recorded for `run`'s result, if any (the delivery log's record), handed on again when it
 * was never attempted: its owner died after recording it and before handing it on. A copy its lane or
 * the queue already has adds nothing (the lane and the consumer know a delivery by its id). Its body is
 * `text` when given, else the run's stored result.
 */
export async function handOnAgain(
  scope: Scope,
  run: AsyncRun,
  text?: string,
): Promise<Awaited<ReturnType<typeof recordedDelivery>>> {
  const noted = run.deliveryId === "none" ? null : run.deliveryId;
  // Its run's log (the same shard), then D1, which recorded deliveries before the log did.
  const inLog = await recordedDelivery(logDbOf(scope, run.projectId, run.id), run.projectId, run.id, noted);
  const recorded =
    inLog ??
    (scope.config.deliveryLogStore === "objects"
      ? await recordedDelivery(scope.db, run.projectId, run.id, noted)
      : undefined);
  if (recorded?.status === "pending" && recorded.attemptCount === 0) {
    const result = text ?? (await readPayload(scope.env, resultKey(run.id), run.result, run.resultInR2));
    if (result !== null) await handToLane(scope, pendingOf(recorded), result);
  }
  return recorded;
}

/**
 * The stored ending of a run that ends in a problem of the gateway's (`problem`, whose JSON `text` is its
 * result), failed with `errorCode`: an async run never answered, a waited run its keeper lost mid-call.
 */
export function problemEnding(
  problem: ProblemCode,
  text: string,
  errorCode: string,
  errorMessage: string,
  finishedAt: Date,
): StoredEnding {
  return {
    status: "failed",
    resultStatus: PROBLEMS[problem].status,
    resultType: PROBLEM_CONTENT_TYPE,
    resultBytes: byteLength(text),
    result: text,
    resultInR2: false,
    errorCode,
    errorMessage,
    finishedAt,
  };
}

/**
 * Ends a run that will never have an app's answer (its consumer died, or it was never started), at
 * most once: only the write that moves it from `from` gives it to the webhook. `claimedBy` narrows a running run to
 * the claim of one queue message.
 */
export async function endUnanswered(
  scope: Scope,
  rows: RunRows,
  run: AsyncRun,
  from: "queued" | "running",
  claimedBy: string | null,
  why: Unanswered,
  outcomes: OutcomePort,
): Promise<boolean> {
  const text = unansweredText(run, why);
  const ending = problemEnding(unansweredProblem(why), text, why, UNANSWERED_DETAIL[why], scope.deps.now());
  const ended = await rows.end(run.id, from, claimedBy, ending);
  if (!ended) return false;
  tellIfFollowed(scope, run.id, "failed", ended.followed, () => runJson({ ...run, ...ending }, text));
  // A deadline is a run the caller made and its deadline ended: recorded, as a timeout.
  if (why === "interrupted" || why === "deadline") {
    const problem = unansweredProblem(why);
    const events = storedRunEvents(scope, run, appPathOfRun(run, null), outcomes);
    // The claim came just before the call: whether the app was called is not known, only that it may
    // have been. A run past its deadline while queued was never called.
    if (why === "interrupted" && run.startedAt) events.record({ kind: "called", at: run.startedAt.getTime() });
    events.record({ kind: "failed", problem: { code: problem, status: PROBLEMS[problem].status } });
    events.ended({
      at: scope.deps.now().getTime(),
      bytesIn: 0,
      bytesOut: byteLength(text),
      webhook: run.webhookEndpoint !== null,
    });
  }
  logError(`async run ${why}`, {
    run_id: run.id,
    project_id: run.projectId,
    from,
    started_at: run.startedAt?.toISOString() ?? null,
  });
  await handOnResult(scope, rows, run, text);
  return true;
}

/**
 * A stored run's events as its row begins them (its hand-over, a waited run's), its start from the row:
 * who, which app and `path`, how asked, when accepted. Its outcome goes to `outcomes`.
 */
export function storedRunEvents(scope: Scope, run: AsyncRun, path: string, outcomes: OutcomePort): RunEvents {
  const start: RunStart = {
    runId: run.id,
    projectId: run.projectId,
    appName: run.appName,
    path: outcomePath(path),
    method: run.method,
    mode: run.mode,
    caller: run.caller,
    requestId: run.requestId,
    acceptedAt: run.createdAt.getTime(),
  };
  const events = runEvents(start, (outcome) => outcomes.ended(scope, outcome));
  if (run.handedOverAt) events.record({ kind: "handed_over", at: run.handedOverAt.getTime() });
  return events;
}
