import type { AsyncRun } from "../../db/schema";
import type { Scope } from "../../platform/scope";
import { deploymentOf } from "../../apps/deployments";
import { answerRun } from "../answer";
import { contextOf } from "../context";
import { type AdmittedRun, admittedRunOf } from "../admitted";
import { appPathOfRun, storedAppRequest } from "../app-request";
import { handToLane } from "../../webhooks/enqueue";
import { endingOf, endUnanswered, handOnAgain, resultDeliveryOf, storedRunEvents } from "./lifecycle";
import type { Ended } from "./store";
import { bodyBytes, dropPayloads, readPayload, requestKey } from "./payloads";
import { d1RunRows, type RunRows, runRowsOf } from "./rows";
import { logError } from "../../platform/log";
import { retry } from "../../platform/retry";
import { asyncRunMessageOf } from "./message";
import { type OutcomePort, runClock } from "../outcome";
import { deadlineOf, withDeadline } from "../deadline";
import { tellIfFollowed } from "./followers";
import { runJson } from "./resource";

/**
 * The `async-runs` consumer: claims a run (`queued → running`) before calling its app, at most once
 * (docs/runs.md#at-most-once). A batch's runs go side by side, each on its own from its claim to its
 * ack, so each has the invocation's 15 minutes of wall time (ASYNC_RUN_TIMEOUT_MS ≤ 14 minutes). Limits
 * relied on, and how a batch stays within them (docs/runs.md#limits-and-where-they-come-from;
 * wrangler.toml `max_batch_size = 3`, a test holds it to these numbers):
 * - 6 simultaneous connections per invocation: a run holds one at a time (its app, R2 or the queue; its
 *   keeper, log and lane are Durable Object calls, not connections), the usage flush one; so at most
 *   RUNS_SIDE_BY_SIDE_MAX runs go side by side, and a larger batch's rest goes back to the queue.
 * - 50 subrequests per invocation on Workers Free: SUBREQUESTS_PER_RUN for each run when nothing fails,
 *   SUBREQUESTS_PER_INVOCATION once; 3 runs make 43, the 7 left are for retries. An outage that takes
 *   more fails those calls as it would have failed them anyway (the run ends `interrupted`, its message
 *   retried). Workers Paid allows 10,000: a batch of 5 fits there.
 * - 128 MB per isolate: a batch's runs share it as a keeper's runs do (docs/runs.md#admission-count-bytes-a-callers-share);
 *   each holds its request (≤ 6 MiB) and, while it is read, its answer (≤ 10 MiB).
 * Why a batch and not one run per invocation: each invocation costs the broker's dispatch, a usage flush
 * and the invocation itself; measured, 3 runs per invocation cost 1.78× the CPU of a synchronous run with
 * a webhook against 2.18× for one (docs/benchmarks.md). `max_batch_timeout = 0`: a run alone is not held
 * back to fill a batch; a batch fills only from a backlog.
 */

/** Writes that end a run are tried this often before the message goes back (to end the run `interrupted`). */
const END_TRIES = 3;

/** Runs of one batch that go side by side at most: each holds one connection at a time, the usage flush one, within 6. */
export const RUNS_SIDE_BY_SIDE_MAX = 5;

/**
 * Subrequests one run makes at most when no call fails: its claim, and D1's while it still holds runs
 * from before the keepers; its request from R2; the app; its result to R2; the webhook's body to R2; its
 * end, and D1's; its follower told twice (running, ended); its delivery to its lane, or the queue; its
 * request dropped from R2.
 */
export const SUBREQUESTS_PER_RUN = 13;

/** Subrequests an invocation makes once, whatever its batch: D1 asked whether it still holds runs; the usage flush (two tries, or the queue). */
export const SUBREQUESTS_PER_INVOCATION = 4;

/**
 * The admitted run a row keeps (`admitted`, as admission made it): its consumer calls the app as the run
 * was admitted, so an app redeployed between the 202 and the call answers in the form it was asked of.
 * A row from before that column has none: its run is rebuilt from the row and the app's deployment now
 * (an app deleted since answers as a `custom` one, passed through).
 */
async function admittedOf(scope: Scope, run: AsyncRun): Promise<AdmittedRun> {
  const stored = run.admitted === null ? null : admittedRunOf(JSON.parse(run.admitted));
  if (stored !== null) return stored;
  let deployment: { runtime: "cortex" | "custom"; originUrl: string | null };
  try {
    deployment = await deploymentOf(scope.db, run.projectId, run.appName, scope.deps.now().getTime());
  } catch {
    deployment = { runtime: "custom", originUrl: null };
  }
  const headers = new Headers(JSON.parse(run.requestHeaders) as [string, string][]);
  return {
    v: 1,
    runId: run.id,
    projectId: run.projectId,
    appName: run.appName,
    appPath: appPathOfRun(run, deployment.originUrl),
    method: run.method,
    caller: run.caller,
    requestId: run.requestId,
    runtime: deployment.runtime,
    acceptHeader: headers.get("accept"),
    limits: { headersMs: scope.config.asyncRunTimeoutMs, idleMs: scope.config.runStreamIdleMs },
    acceptedAt: run.createdAt.getTime(),
    cancelAfterMs: run.deadlineAt === null ? null : run.deadlineAt.getTime() - run.createdAt.getTime(),
    webhook: run.webhookEndpoint === null ? null : { endpoint: run.webhookEndpoint, secret: null },
    bytesIn: 0,
    mode: { kind: "async", key: null },
  };
}

async function execute(
  scope: Scope,
  rows: RunRows,
  run: AsyncRun,
  messageId: string,
  outcomes: OutcomePort,
): Promise<void> {
  const { env, deps } = scope;
  const clock = runClock(deps.now().getTime());
  const stored = await readPayload(env, requestKey(run.id), run.requestBody, run.requestInR2);
  if (stored === null && run.requestInR2) {
    // The stored request is gone: nothing can be run. Ends like a run whose consumer died.
    await endUnanswered(scope, rows, run, "running", messageId, "interrupted", outcomes);
    return;
  }
  // The caller's exact bytes, whether stored as UTF-8 text or as base64.
  const body = stored === null ? null : bodyBytes(stored, run.requestBodyEncoding);
  // The app's request as `appRequestOf` built it at acceptance.
  const appRequest = storedAppRequest(run, body);
  const admitted = await admittedOf(scope, run);
  const context = contextOf(admitted, deps.now);
  // ASYNC_RUN_TIMEOUT_MS bounds the whole run here, a stream included: the invocation has 15 minutes.
  // A deadline (`Cancel-After`, counted from acceptance) may end it sooner.
  const created = run.createdAt.getTime();
  const deadline =
    run.deadlineAt === null
      ? null
      : deadlineOf(run.id, run.deadlineAt.getTime() - created, deps.now().getTime() - created, deps.sleep);
  const cancel = withDeadline(AbortSignal.timeout(admitted.limits.headersMs), deadline);
  const answer = await answerRun(deps, appRequest, context, cancel).finally(() => deadline?.dispose());
  const ending = await endingOf(env, run.id, answer, deps.now());
  // The webhook's delivery is recorded with the run's end (by its keeper, or one D1 batch for a run kept
  // there before), and handed on after it.
  const delivery = await resultDeliveryOf(scope, run);
  const ended = await retry(() => rows.end(run.id, "running", messageId, ending, delivery ?? undefined), {
    tries: END_TRIES,
    sleep: deps.sleep,
    pauseMs: (tries) => 50 * tries,
  });
  // A try whose answer was lost may have ended it: the run then has this very ending.
  const ours: (Ended & { handOn?: boolean }) | undefined =
    ended ?? (await endedByThis(rows, run.id, ending.finishedAt, delivery?.deliveryId ?? null));
  if (!ours) {
    logError("async run ended by someone else before its consumer", { run_id: run.id });
    return;
  }
  tellIfFollowed(scope, run.id, ending.status, ours.followed, () => runJson({ ...run, ...ending }, answer.text));
  const events = storedRunEvents(scope, run, admitted.appPath, outcomes);
  events.record({ kind: "called", at: clock(answer.calledAt) });
  if (answer.answeredAt !== null)
    events.record({ kind: "answered", at: clock(answer.answeredAt), status: answer.status });
  if (answer.failure !== null) events.record({ kind: "failed", problem: answer.failure });
  events.ended({
    at: clock(),
    bytesIn: body?.byteLength ?? 0,
    bytesOut: ending.resultBytes,
    webhook: run.webhookEndpoint !== null,
  });
  // Unless the run did not note its delivery (a keeper stopped in between: its sweep hands it on).
  if (delivery?.pending && ours.handOn !== false)
    await handToLane(scope, { ...delivery.pending, recorded: ours.recorded ?? delivery.pending.recorded }, answer.text);
  if (run.requestInR2) await dropPayloads(env, [requestKey(run.id)]);
}

/**
 * The run, when a write whose answer was lost ended it: it has this very ending (`finishedAt`, to the
 * millisecond). Whether its delivery's record was written is not known (`recorded: false`: a delivery
 * that never reaches a claim is settled by writing it); it is handed on (`handOn`) only if the run noted
 * that very delivery, else the sweep finds the record or makes the one delivery.
 */
async function endedByThis(
  rows: RunRows,
  runId: string,
  finishedAt: Date,
  deliveryId: string | null,
): Promise<(Ended & { handOn: boolean }) | undefined> {
  const now = await rows.byId(runId);
  if (now?.finishedAt?.getTime() !== finishedAt.getTime()) return undefined;
  return { followed: now.followed, recorded: false, handOn: deliveryId === null || now.deliveryId === deliveryId };
}

/**
 * One message: `abandoned` when it is the dead-letter copy of one the `async-runs` queue gave up on
 * (`consumeAbandonedAsyncRuns`): the claim a run holds is then taken for this message's, whatever its id.
 */
async function consume(msg: Message<unknown>, scope: Scope, outcomes: OutcomePort, abandoned = false): Promise<void> {
  const { deps } = scope;
  const message = asyncRunMessageOf(msg.body);
  if (message === null) {
    logError("unreadable async run message dropped", { message_id: msg.id });
    return msg.ack();
  }
  const runId = message.run_id;
  // A message without its project (sent before accept.ts named it) is of a run kept in D1.
  const rows = message.project_id === undefined ? d1RunRows(scope.db, "") : runRowsOf(scope, message.project_id, runId);
  let claimed: AsyncRun | undefined;
  try {
    claimed = await rows.claim(runId, msg.id, deps.now());
    tellIfFollowed(scope, runId, "running", claimed?.followed, () => runJson(claimed!, null));
    if (!claimed) {
      // Found in D1 too, whatever the isolate learnt of it: see `claim` (rows.ts).
      const run = (await rows.byId(runId)) ?? (await d1RunRows(scope.db, "").byId(runId));
      const ours = run !== undefined && (abandoned || run.claimedBy === msg.id);
      // Claimed by this very message before: the invocation that had it died mid-run.
      if (run?.status === "running" && ours)
        await endUnanswered(scope, rows, run, "running", run.claimedBy, "interrupted", outcomes);
      // Still queued: its deadline passed before it could start. The app is never called for it.
      else if (run?.status === "queued") await endUnanswered(scope, rows, run, "queued", null, "deadline", outcomes);
      // Ended by this very message before, whose invocation died before it handed the result's
      // delivery on: handed on again (nothing else would: the run has noted its delivery).
      else if (ours && run.deliveryId !== null && run.deliveryId !== "none") await handOnAgain(scope, run);
      return msg.ack();
    }
  } catch (error) {
    // Nothing was executed: another attempt may claim it.
    logError("async run not claimed", { run_id: runId, attempts: msg.attempts, error });
    return msg.retry({ delaySeconds: 1 });
  }
  try {
    await execute(scope, rows, claimed, msg.id, outcomes);
    msg.ack();
  } catch (error) {
    // Storage failed after the app was called. The run is never executed again: the redelivered
    // message finds it running under its own claim and ends it `interrupted`.
    logError("async run crashed after its claim", { run_id: runId, attempts: msg.attempts, error });
    msg.retry({ delaySeconds: 1 });
  }
}

/**
 * The `async-runs-dlq` consumer: each message is one the `async-runs` queue gave up on after
 * `max_retries` (every delivery of it failed, or its invocations died), so nothing else will come for its
 * run. It does what that message's last redelivery would have done, and its copy has an id of its own
 * (Cloudflare keeps no promise that a dead letter keeps the id; Miniflare gives it a new one), so the
 * claim the run holds counts as its: a run left running ends `interrupted`, a run ended whose delivery
 * was recorded and never attempted has it handed on, a queued run is claimed and run as any message's
 * would be (never twice: the claim is conditional). A duplicate copy of the original still running its
 * app when this arrives (Queues send a message at least once) finds its end refused and logs it. A dead letter
 * that fails in turn is retried by its queue, then dropped; the run's keeper sweeps what is left
 * (runs/async/sweep.ts: running 16 minutes, queued 24 hours, a result not handed to its delivery).
 */
export async function consumeAbandonedAsyncRuns(
  batch: MessageBatch<unknown>,
  scope: Scope,
  outcomes: OutcomePort,
): Promise<void> {
  await Promise.all(batch.messages.map((msg) => consume(msg, scope, outcomes, true)));
}

/** The consumer; `outcomes` receives each run's outcome when it ended (the root wires usage's). */
export async function consumeAsyncRuns(
  batch: MessageBatch<unknown>,
  scope: Scope,
  outcomes: OutcomePort,
): Promise<void> {
  // More than the connections allow (a `max_batch_size` raised past it): the rest waits for another invocation.
  const later = batch.messages.slice(RUNS_SIDE_BY_SIDE_MAX);
  if (later.length > 0) {
    logError("async runs batch larger than its runs side by side: the rest goes back to the queue", {
      messages: batch.messages.length,
      side_by_side: RUNS_SIDE_BY_SIDE_MAX,
    });
    for (const msg of later) msg.retry({ delaySeconds: 0 });
  }
  await Promise.all(batch.messages.slice(0, RUNS_SIDE_BY_SIDE_MAX).map((msg) => consume(msg, scope, outcomes)));
}
