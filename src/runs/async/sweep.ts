import type { PurgeStep } from "../../platform/purge";
import type { Scope } from "../../platform/scope";
import { IDEMPOTENCY_WINDOW_MS } from "../idempotency";
import { handOnAgain, handOnResult, endUnanswered } from "./lifecycle";
import { dropPayloads, readPayload, requestKey, resultKey } from "./payloads";
import { d1SweptRuns, type SweptRuns } from "./rows";
import { handToLane, pendingOf } from "../../webhooks/enqueue";
import { STALE_AFTER_MS } from "../../webhooks/housekeeping";
import { log } from "../../platform/log";
import type { OutcomePort } from "../outcome";

/** Finished runs (their results and records) are kept this long, then purged. */
export const RUN_RETENTION_MS = 7 * 24 * 3600 * 1000;
/**
 * A consumer invocation cannot outlive 15 minutes of wall time: a run still `running` a minute after
 * that has lost its consumer and ends `failed` (`interrupted`).
 */
export const RUNNING_MAX_MS = 16 * 60_000;
/** A run still `queued` after this was never picked up (its message was lost): it ends `failed` (`expired`), never run. */
export const QUEUED_MAX_MS = 24 * 3600 * 1000;
/** A consumer gives a result to the webhook pipeline within a second of ending the run; one still without its delivery after this never will have it from it. */
export const RESULT_DELIVERY_MAX_MS = 2 * 60_000;

/*
 * Subrequest budget of one sweep, planned for Workers Free's 50 (D1, R2, queue and Durable Object calls
 * counted): 3 selects (running, queued, undelivered) + ≤ 6 runs ended or given their delivery × ≤ 7
 * (conditional write or delivery lookup, R2 read of the result, the delivery's D1 insert, R2 put, the
 * handing to its lane or the queue, the write noting its delivery) + 1 select of expired runs + 2 deletes
 * (100 ids each) + 1 R2 delete (≤ 1,000 keys) + 1 key release = 50. The select of deliveries recorded but
 * never handed on is made only when fewer than 6 runs took their share (then ≤ 5 × 7 + 1 + 4 + 5 ≤ 45).
 * A keeper's sweep makes its selects, writes and deletes in its own storage (no subrequest), so only the
 * D1, R2 and lane calls of the runs it ends count. What is left over waits for the next sweep: a keeper's
 * comes a second later when work is still due; the cron over D1's runs, 5 minutes later.
 */
export const ENDS_PER_SWEEP = 6;
export const PURGES_PER_SWEEP = 200;
/** Keys freed per statement; the `* * * * *` cron frees the rest in slices (`asyncRunSteps`). */
export const KEYS_PER_SLICE = 1000;

/**
 * Deletes up to `rows` runs finished before `finishedBefore`, oldest first, and their R2 payloads; how
 * many. Three subrequests: the select, one R2 delete (≤ 2 keys a run, so ≤ 500 runs a slice), one batch.
 */
export async function purgeRuns(scope: Scope, runs: SweptRuns, finishedBefore: Date, rows: number): Promise<number> {
  const expired = await runs.expired(finishedBefore, Math.min(rows, RUN_SLICE_MAX));
  const keys = expired.flatMap((r) => [
    ...(r.requestInR2 ? [requestKey(r.id)] : []),
    ...(r.resultInR2 ? [resultKey(r.id)] : []),
  ]);
  // Payloads first: a row deleted before its payload would leave the payload with nothing pointing at it.
  await dropPayloads(scope.env, keys);
  await runs.removeAll(expired.map((r) => r.id));
  return expired.length;
}

/** R2 deletes at most 1,000 keys per call, and a run has two at most. */
export const RUN_SLICE_MAX = 500;

/**
 * Async runs' retention steps at `now` for the purge in slices (src/platform/purge.ts): finished runs
 * past `RUN_RETENTION_MS` with their payloads, and `Idempotency-Key`s past their 24 hours. A run in
 * flight (`queued`, `running`) has no `finished_at`, so no step ever takes it.
 */
export function asyncRunSteps(scope: Scope): PurgeStep[] {
  const now = scope.deps.now().getTime();
  // The runs D1 still holds: each keeper purges its own from its alarm (`sweepAsyncRuns`).
  const runs = d1SweptRuns(scope.db);
  return [
    {
      name: "async_runs",
      subrequests: 3,
      slice: (rows) => purgeRuns(scope, runs, new Date(now - RUN_RETENTION_MS), rows),
    },
    {
      name: "idempotency_keys",
      subrequests: 1,
      slice: (rows) => runs.releaseKeys(new Date(now - IDEMPOTENCY_WINDOW_MS), rows),
    },
  ];
}

/**
 * A sweep of `runs`: settles runs left running or queued too long, hands over results that never reached
 * their delivery, purges past retention (`purges` at most), frees old keys. Each keeper sweeps its own
 * runs from its alarm (src/runs/wait/keeper.ts); the `*\/5 * * * *` cron sweeps what D1 still holds
 * (runs kept there before they moved to their keepers: docs/operations.md).
 */
export async function sweepAsyncRuns(
  scope: Scope,
  outcomes: OutcomePort,
  runs: SweptRuns = d1SweptRuns(scope.db),
  purges = PURGES_PER_SWEEP,
): Promise<void> {
  const { env, deps } = scope;
  const now = deps.now().getTime();
  const running = await runs.stale("running", new Date(now - RUNNING_MAX_MS), ENDS_PER_SWEEP);
  const queued = await runs.stale("queued", new Date(now - QUEUED_MAX_MS), ENDS_PER_SWEEP - running.length);
  // One at a time: handing each delivery to its lane opens connections (R2, queue), and Workers allow 6 at once.
  for (const run of running)
    await endUnanswered(scope, runs.rowsOf(run), run, "running", null, "interrupted", outcomes);
  for (const run of queued) await endUnanswered(scope, runs.rowsOf(run), run, "queued", null, "expired", outcomes);
  const undelivered = await runs.undelivered(
    new Date(now - RESULT_DELIVERY_MAX_MS),
    ENDS_PER_SWEEP - running.length - queued.length,
  );
  for (const run of undelivered) {
    // Its owner died after recording the delivery but before noting it: one record is enough.
    const recorded = await handOnAgain(scope, run);
    if (recorded) {
      await runs.rowsOf(run).deliveryNoted(run.id, recorded.id);
      continue;
    }
    const result = await readPayload(env, resultKey(run.id), run.result, run.resultInR2);
    if (result !== null) await handOnResult(scope, runs.rowsOf(run), run, result);
    else {
      // Its result is gone from R2: it will never have a delivery. Noted, so no sweep meets it again.
      log("error", "async run's result unreadable: no delivery", { run_id: run.id, project_id: run.projectId });
      await runs.rowsOf(run).deliveryNoted(run.id, "none");
    }
  }
  // The consumer wrote the delivery with the run's end and died before handing it on: hand it on
  // again (a copy its lane or the queue already has adds nothing).
  const room = ENDS_PER_SWEEP - running.length - queued.length - undelivered.length;
  const unsent =
    room > 0 ? await runs.unsent(new Date(now - STALE_AFTER_MS), new Date(now - RESULT_DELIVERY_MAX_MS), room) : [];
  for (const { run, delivery } of unsent) {
    const result = await readPayload(env, resultKey(run.id), run.result, run.resultInR2);
    if (result !== null) await handToLane(scope, pendingOf(delivery), result);
  }

  const purged = await purgeRuns(scope, runs, new Date(now - RUN_RETENTION_MS), purges);
  await runs.releaseKeys(new Date(now - IDEMPOTENCY_WINDOW_MS), KEYS_PER_SLICE);
  if (running.length + queued.length + undelivered.length + unsent.length + purged > 0) {
    log("info", "async runs swept", {
      interrupted: running.length,
      expired: queued.length,
      handed_over: undelivered.length,
      handed_on_again: unsent.length,
      purged,
    });
  }
}
