import { type AsyncRun, asyncRuns } from "../../db/schema";
import type { Database } from "../../db/client";
import { ApiError } from "../../platform/errors";
import { log } from "../../platform/log";
import { allLimited } from "../../platform/concurrency";
import { KEEPER_SHARDS, keeperName, keeperObject, keeperOfShard } from "../wait/shard";
import type { Ended, ListedRun, NewAsyncRun, ResultDelivery, RunFilter, RunState, StoredEnding } from "./store";
import * as d1 from "./store";

/**
 * Where a project's async runs (and waited runs handed over) are kept: the operations the run's owners
 * make on its row, whatever holds it. The run's keeper (`keptRunRows`, kept-runs.ts), each operation one
 * conditional write or read of one object; D1's `async_runs` (`d1RunRows`) for the runs written there
 * before they moved (docs/runs.md#where-async-runs-are-kept). Every state change stays one conditional
 * write on the run's status (store.ts says why), whoever keeps the row.
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

/** The operations a keeper answers on the runs it keeps, through its one RPC method (`runs(op, args)`). */
export type KeptRunsOp = keyof RunRows | "page";
/** `insert`'s answer from a keeper: written, its caller's key names another run, or the keeper's storage is full. */
export type KeptInsert = "taken" | "key_taken" | "full";

/** The keeper's storage is past its bound (kept-runs.ts): the run is not taken, and the caller may retry later. */
export const runStoreFull = () =>
  new ApiError(
    "service_unavailable",
    "The project's store of runs is full until its retention frees room; nothing was run. Retry the request later.",
    { headers: { "Retry-After": "60" } },
  );

/** `RunRows` over a keeper's `runs(op, args)`: a Worker's stub of it, or the keeper's own method. */
export function keptRunRows(call: (op: KeptRunsOp, args: unknown[]) => Promise<unknown>): RunRows & {
  page(filter: RunFilter): Promise<ListedRun[]>;
  noted(runId: string, deliveryId: string): Promise<boolean>;
} {
  const op =
    <R>(name: KeptRunsOp) =>
    (...args: unknown[]) =>
      call(name, args) as Promise<R>;
  return {
    insert: async (run) => {
      const answer = (await call("insert", [run])) as KeptInsert;
      if (answer === "full") throw runStoreFull();
      return answer === "taken";
    },
    byKey: op("byKey"),
    releaseKey: op("releaseKey"),
    byId: op("byId"),
    stateById: op("stateById"),
    storedResult: op("storedResult"),
    remove: op("remove"),
    claim: op("claim"),
    cancel: op("cancel"),
    end: op("end"),
    follow: op("follow"),
    deliveryNoted: async (runId, deliveryId) => {
      await call("deliveryNoted", [runId, deliveryId]);
    },
    noted: op("deliveryNoted"),
    page: op("page"),
  };
}

/** The rows of the keeper of run `runId` of `projectId` (`keeperName`), through its stub. */
const keeperRows = (env: Env, projectId: string, runId: string) => {
  const keeper = keeperObject(env, keeperName(projectId, runId));
  return keptRunRows((op, args) => keeper.runs(op, args));
};

/**
 * Whether D1's `async_runs` may still hold runs: those kept there before runs moved to their keepers
 * (issue 41 Must 5), read and ended where they are until the retention has taken them. Asked of D1 at
 * most once a minute per isolate, so a warm isolate makes no D1 round trip for a run once they are gone;
 * a Worker of the code before (a gradual deployment) that still writes there is seen within a minute.
 */
const LEGACY_CHECK_MS = 60_000;
let legacy: { may: boolean; at: number } | undefined;
export async function legacyRuns(db: Database): Promise<boolean> {
  if (legacy !== undefined && Date.now() - legacy.at < LEGACY_CHECK_MS) return legacy.may;
  try {
    const [row] = await db.select({ id: asyncRuns.id }).from(asyncRuns).limit(1);
    legacy = { may: row !== undefined, at: Date.now() };
    return legacy.may;
  } catch (error) {
    // D1 unavailable: runs kept by their keepers go on without it; what it was last seen to hold stands
    // (none, if it was never asked), and it is asked again at the next call.
    log("warn", "D1 not asked whether it still holds async runs: taken as last seen", { error });
    return legacy?.may ?? false;
  }
}
/** Tests that seed D1 with runs of the code before forget what the isolate learnt. */
export const forgetLegacyRuns = () => {
  legacy = undefined;
};

/**
 * The rows that hold run `runId` of `projectId`: its keeper's (`keeperName`, the shard read from the
 * id), and D1's for a run kept there before the move, while any are. Every owner of a run (admission, its
 * consumer, its status URL, cancel, a stream, the sweep) finds its row here, from the ids it holds.
 */
export function runRowsOf(scope: { db: Database; env: Env }, projectId: string, runId: string): RunRows {
  return withLegacy(scope.db, keeperRows(scope.env, projectId, runId), d1RunRows(scope.db, projectId));
}

/**
 * `kept` (a keeper's rows), falling back to `old` (D1's, of the same project) for a run that is not
 * kept, while D1 holds runs of the code before: `runRowsOf` for a Worker; a keeper's own rows for the
 * runs it lost mid-call, which a keeper of the code before may have handed over to D1.
 */
export function withLegacy(db: Database, kept: ReturnType<typeof keptRunRows>, old: RunRows): RunRows {
  const scope = { db };
  /** Set once D1 answered a claim: the run is D1's, and what follows (its end) goes there too. */
  let claimedInD1 = false;
  const mayBeInD1 = async () => claimedInD1 || (await legacyRuns(scope.db));
  const orOld =
    <A extends unknown[], R>(
      first: (...args: A) => Promise<R | undefined>,
      then: (...args: A) => Promise<R | undefined>,
    ) =>
    async (...args: A): Promise<R | undefined> =>
      (await first(...args)) ?? ((await mayBeInD1()) ? then(...args) : undefined);
  return {
    // A key a run of the code before holds in D1 is taken until its 24 hours are over (accept.ts frees
    // it then): the new run is not kept, and the caller's request is answered by that run.
    insert: async (run) => {
      const key = run.idempotencyKey;
      if (key && (await legacyRuns(scope.db)) && (await old.byKey(run.caller ?? "", key))) return false;
      return kept.insert(run);
    },
    byKey: orOld(kept.byKey, old.byKey),
    releaseKey: async (id, createdBefore) => {
      await kept.releaseKey(id, createdBefore);
      if (await legacyRuns(scope.db)) await old.releaseKey(id, createdBefore);
    },
    byId: orOld(kept.byId, old.byId),
    stateById: orOld(kept.stateById, old.stateById),
    storedResult: orOld(kept.storedResult, old.storedResult),
    remove: kept.remove,
    // Asked of D1 whenever the keeper has no queued run to claim (a copy of a message, a run ended or
    // withdrawn: rare), cached or not: a run a Worker of the code before wrote there a moment ago (a
    // gradual deployment) is run, not dropped as absent.
    claim: async (...args) => {
      const ours = await kept.claim(...args);
      if (ours) return ours;
      const claimed = await old.claim(...args);
      claimedInD1 ||= claimed !== undefined;
      return claimed;
    },
    cancel: orOld(kept.cancel, old.cancel),
    end: orOld(kept.end, old.end),
    follow: orOld(kept.follow, old.follow),
    deliveryNoted: async (id, deliveryId) => {
      if (!(await kept.noted(id, deliveryId)) && (await mayBeInD1())) await old.deliveryNoted(id, deliveryId);
    },
  };
}

/**
 * A page of `projectId`'s runs, newest first: each of its keepers' page and D1's (while it holds runs
 * of the code before), merged by id. At most 6 keepers are asked at once (a Worker's simultaneous
 * connections); each answers at most `filter.limit` rows, so the merge reads at most 9 × that.
 */
export async function projectRuns(
  scope: { db: Database; env: Env },
  projectId: string,
  filter: RunFilter,
): Promise<ListedRun[]> {
  const shards = Array.from({ length: KEEPER_SHARDS }, (_, shard) => shard);
  const pages = await allLimited(shards, 6, (shard) => {
    const keeper = keeperObject(scope.env, keeperOfShard(projectId, shard));
    return keptRunRows((op, args) => keeper.runs(op, args)).page(filter);
  });
  if (await legacyRuns(scope.db)) pages.push(await d1.listRuns(scope.db, projectId, filter));
  return pages
    .flat()
    .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
    .slice(0, filter.limit);
}
