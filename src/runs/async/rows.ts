import type { AsyncRun } from "../../db/schema";
import type { Database } from "../../db/client";
import type { Ended, NewAsyncRun, ResultDelivery, RunState, StoredEnding } from "./store";
import * as d1 from "./store";

/**
 * Where a project's async runs (and waited runs handed over) are kept: the operations the run's owners
 * make on its row, whatever holds it. D1's `async_runs` today (`d1RunRows`); the run's keeper once runs
 * leave the shared database (docs/architecture.md, "The sixth wave's moves"), each of its operations one
 * conditional write or read of one object. Every state change stays one conditional write on the
 * run's status (store.ts says why), whoever keeps the row.
 */
export interface RunRows {
  /** Writes a queued run; `false` when its `Idempotency-Key` is taken by its caller (nothing was written). */
  insert(run: NewAsyncRun): Promise<boolean>;
  /** The run of `caller`'s `key`, if any. */
  byKey(caller: string, key: string): Promise<AsyncRun | undefined>;
  /** Frees the key of run `runId` if it was made before `createdBefore`. */
  releaseKey(runId: string, createdBefore: Date): Promise<void>;
  byId(runId: string): Promise<AsyncRun | undefined>;
  /** The run's state without its payloads. */
  stateById(runId: string): Promise<RunState | undefined>;
  storedResult(runId: string): Promise<Pick<AsyncRun, "result" | "resultInR2"> | undefined>;
  /** Withdraws a run that was never queued. */
  remove(runId: string): Promise<void>;
  /** `queued → running` for queue message `messageId` (store.ts `claimRun`). */
  claim(runId: string, messageId: string, now: Date): Promise<AsyncRun | undefined>;
  /** `queued → cancelled` of a run of `appName` (store.ts `cancelRun`). */
  cancel(appName: string, runId: string, now: Date): Promise<AsyncRun | undefined>;
  /** Ends a run in state `from` (store.ts `endRun`), with its result's delivery when given. */
  end(
    runId: string,
    from: "queued" | "running",
    claimedBy: string | null,
    ending: StoredEnding,
    delivery?: ResultDelivery,
  ): Promise<Ended | undefined>;
  /** Marks the run followed and reads its state, in one write. */
  follow(runId: string): Promise<RunState | undefined>;
  /** The run's result went to the webhook pipeline as `deliveryId` (`none`: it will not). */
  deliveryNoted(runId: string, deliveryId: string): Promise<void>;
}

/** The rows of `projectId` in D1 (`async_runs`). */
export function d1RunRows(db: Database, projectId: string): RunRows {
  return {
    insert: (run) => d1.insertRun(db, run),
    byKey: (caller, key) => d1.runByKey(db, projectId, caller, key),
    releaseKey: (runId, createdBefore) => d1.releaseKey(db, runId, createdBefore),
    byId: (runId) => d1.runById(db, runId),
    stateById: (runId) => d1.runStateById(db, runId),
    storedResult: (runId) => d1.storedResult(db, runId),
    remove: async (runId) => {
      await d1.deleteRun(db, runId);
    },
    claim: (runId, messageId, now) => d1.claimRun(db, runId, messageId, now),
    cancel: (appName, runId, now) => d1.cancelRun(db, projectId, appName, runId, now),
    end: (runId, from, claimedBy, ending, delivery) => d1.endRun(db, runId, from, claimedBy, ending, delivery),
    follow: (runId) => d1.followRunRow(db, runId),
    deliveryNoted: (runId, deliveryId) => d1.deliveryNoted(db, runId, deliveryId),
  };
}

/**
 * The rows that hold run `runId` of `projectId`: every owner of a run (admission, its consumer, its
 * status URL, cancel, a stream, a keeper's hand-over) finds its row here, from the ids it holds.
 */
export const runRowsOf = (scope: { db: Database }, projectId: string, _runId: string): RunRows =>
  d1RunRows(scope.db, projectId);

/**
 * What the sweep and the retention purge (sweep.ts) read and change of a store's runs, a slice at a
 * time, and the rows of a run they end. D1's for the runs it holds (`d1SweptRuns`); a keeper's alarm
 * sweeps its own the same way.
 */
export interface SweptRuns {
  /** Runs in `status` since before `before` (by start for running, by creation for queued), oldest first. */
  stale(status: "queued" | "running", before: Date, limit: number): Promise<AsyncRun[]>;
  /** Finished runs with a webhook whose result never reached its delivery, finished before `before`. */
  undelivered(before: Date, limit: number): Promise<AsyncRun[]>;
  /** Ended runs whose delivery was recorded with their end and never attempted, recorded between `since` and `before`. */
  unsent(since: Date, before: Date, limit: number): ReturnType<typeof d1.unsentDeliveries>;
  /** Finished runs before `finishedBefore`, oldest first: their ids, and which payloads are in R2. */
  expired(finishedBefore: Date, limit: number): ReturnType<typeof d1.expiredRuns>;
  /** Deletes these runs. */
  removeAll(ids: string[]): Promise<void>;
  /** Frees up to `limit` `Idempotency-Key`s older than `before`; how many. */
  releaseKeys(before: Date, limit: number): Promise<number>;
  /** The rows a run found here is ended through. */
  rowsOf(run: Pick<AsyncRun, "projectId" | "id">): RunRows;
}

/** The runs D1 holds (`async_runs`), every project's. */
export function d1SweptRuns(db: Database): SweptRuns {
  return {
    stale: (status, before, limit) => d1.staleRuns(db, status, before, limit),
    undelivered: (before, limit) => d1.undeliveredRuns(db, before, limit),
    unsent: (since, before, limit) => d1.unsentDeliveries(db, since, before, limit),
    expired: (finishedBefore, limit) => d1.expiredRuns(db, finishedBefore, limit),
    removeAll: (ids) => d1.deleteRuns(db, ids),
    releaseKeys: (before, limit) => d1.releaseKeys(db, before, limit),
    rowsOf: (run) => d1RunRows(db, run.projectId),
  };
}

/** A page of `projectId`'s runs, newest first, wherever they are kept. */
export const projectRuns = (
  scope: { db: Database },
  projectId: string,
  filter: d1.RunFilter,
): Promise<d1.ListedRun[]> => d1.listRuns(scope.db, projectId, filter);
