import { DurableObject } from "cloudflare:workers";
import type { Deps } from "../../platform/deps";
import { ApiError, problemBody } from "../../platform/errors";
import { log } from "../../platform/log";
import { migrateStorage, type StorageShape } from "../../platform/object-storage";
import { createScope, type Scope } from "../../platform/scope";
import { handToLane, type PendingDelivery, recordPending, writePendingDelivery } from "../../webhooks/enqueue";
import { DeliveryLogFullError } from "../../webhooks/log";
import { offWire } from "../app-request";
import { runMeta } from "../call";
import type { OutcomePort } from "../outcome";
import { runEvents } from "../run-events";
import { endInterrupted } from "./handed-over";
import { keepCall, type KeptCall, type RunKeyStatus } from "./kept-call";
import { admittedOfV1, type BusyReason, type KeeperAnswer, type KeyedAnswer, keptRunOf } from "./message";
import { getConfig } from "../../platform/env";
import { sealSecret } from "../../webhooks/secret-box";
import { outcomePath } from "../outcome";
import { IDEMPOTENCY_WINDOW_MS } from "../idempotency";
import { type AdmittedRun, type AdmittedRunIn, admittedRunOf, isMode, startOfAdmitted } from "../admitted";
import { openableWebhookSecret } from "../webhook";
import { dueOfRun, KEPT_RUNS_SCHEMA, KeptRuns } from "../async/kept-runs";
import { handOnAgain } from "../async/lifecycle";
import { d1RunRows, type KeptRunsOp, keptRunRows, type SweptRuns, withLegacy } from "../async/rows";
import type { Ended, NewAsyncRun, ResultDelivery, RunFilter, StoredEnding } from "../async/store";
import {
  QUEUED_MAX_MS,
  RESULT_DELIVERY_MAX_MS,
  RUN_RETENTION_MS,
  RUN_SLICE_MAX,
  RUNNING_MAX_MS,
  sweepAsyncRuns,
} from "../async/sweep";

export { KEEPER_SHARDS, keeperName } from "./shard";

/**
 * The keepers of waited runs (`RUN_KEEPER`), one per project and shard of the run id: each owns the app
 * call of the waited runs it takes, from before the call to the run's end, whoever waits for it. Why one
 * keeper holds many runs, its admission and the "called" write's decision (no `sync()`):
 * docs/runs.md#the-keeper; exactly one call per run: docs/runs.md#a-run-the-platform-interrupts-mid-call.
 *
 * Platform limits relied on:
 * - a Durable Object stays in memory for a request or an alarm handler, not for an outbound `fetch`;
 * - an alarm handler has 15 minutes of wall time, runs at least once and is retried;
 * - storage writes are durable before the object's messages leave (the output gate);
 * - 6 outbound connections per request it serves, 128 MB and one thread per isolate, shared by its runs.
 */

/** A run's keeper holds it from this soon after its call starts (until then the Worker's request holds the object). */
const HOLD_FROM_MS = 5_000;
/** One alarm holds the keeper's runs this long (of its 15 minutes of wall time), then re-arms. */
const ALARM_HOLD_MS = 14 * 60_000;

/**
 * The bytes of request bodies a keeper holds at once: 48 MiB, eight bodies at the 6 MiB limit. Of the
 * isolate's 128 MB this leaves about 75 MiB for what its runs hold of their answers (a copy at most
 * 4 MiB, an envelope or a handed-over run's answer at most 10 MiB, whichever few are being read at
 * once) and for the runtime itself. A body is charged from admission to the run's end.
 */
export const KEEPER_BODY_BYTES_MAX = 48 * 1024 * 1024;
/**
 * A caller holds at most this part of a keeper's runs (half: 16 of 32, so 128 of a project's 256): the
 * other half stays for the project's other callers, and a caller alone never meets it by the chance of
 * its run ids' shards (40 runs in flight put about 5 in each keeper, rarely more than 10).
 */
export const callerRunsMax = (runsMax: number) => Math.max(1, Math.ceil(runsMax / 2));
/**
 * Handed-over runs fill at most this many of a keeper's runs (three quarters: 24 of 32); past it the
 * rest go only to callers with no handed-over run in the keeper, so callers who wait keep their room.
 */
export const handedOverRunsMax = (runsMax: number) => runsMax - Math.floor(runsMax / 4);

/** A run a keeper holds: from its admission (before any await) to its end; `call` once it is made. */
interface Held {
  caller: string;
  bytes: number;
  handedOver: boolean;
  /** Its call once made (`null` when it never was: the run is not taken, its slot is free). */
  call: Promise<KeptCall | null>;
}

/** Why the keeper does not take `run` now, or `null` when it does (docs/runs.md#the-keeper). */
export function keeperRefusal(
  held: Iterable<Held>,
  run: { caller: string; bytes: number },
  runsMax: number,
): BusyReason | null {
  let runs = 0;
  let bytes = run.bytes;
  let callers = 0;
  let handedOver = 0;
  let callerHandedOver = false;
  for (const h of held) {
    runs++;
    bytes += h.bytes;
    if (h.caller === run.caller) callers++;
    if (h.handedOver) {
      handedOver++;
      if (h.caller === run.caller) callerHandedOver = true;
    }
  }
  if (callers >= callerRunsMax(runsMax)) return "caller";
  if (handedOver >= handedOverRunsMax(runsMax) && callerHandedOver) return "handed_over";
  if (runs >= runsMax) return "runs";
  if (bytes > KEEPER_BODY_BYTES_MAX) return "bytes";
  return null;
}

/** What the keeper stores of a run it holds, from "called" to the run's end (then the record goes). */
interface KeptRecord {
  phase: "called" | "handed_over";
  /** The run as the Worker handed it (its webhook secret sealed); a record from before the admitted run: `keptRunOf`. */
  run: AdmittedRun;
  /** The app's URL it called. */
  target: string;
  /** The run's delivery, on record before the call (its secret sealed); null without a webhook. */
  delivery: StoredDelivery | null;
  calledAt: number;
  handedOverAt: number | null;
}

type StoredDelivery = Omit<PendingDelivery, "secret" | "createdAt"> & { createdAt: number };

/**
 * The keeper's storage (SQLite): a record per run it holds, the runs of its callers'
 * `Idempotency-Key`s (24 hours each; each new key removes up to KEYS_PURGED expired ones, so expired
 * keys go faster than keys come), and the async and handed-over runs of its shard (`KeptRuns`,
 * runs/async/kept-runs.ts: their state, small payloads and results, for their retention).
 */
const SCHEMA = [
  "CREATE TABLE IF NOT EXISTS kept_runs (run_id TEXT PRIMARY KEY, record TEXT NOT NULL)",
  `CREATE TABLE IF NOT EXISTS run_keys (
    caller TEXT NOT NULL, key TEXT NOT NULL, run_id TEXT NOT NULL, request_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL, status TEXT NOT NULL, PRIMARY KEY (caller, key)
  ) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS run_keys_created ON run_keys (created_at)",
  "CREATE INDEX IF NOT EXISTS run_keys_run ON run_keys (run_id)",
  ...KEPT_RUNS_SCHEMA,
];
/**
 * Its version in `meta` (`migrateStorage`); no step since the first keepers, which kept none: the runs'
 * table and indexes came later, `IF NOT EXISTS`, and the schema alone makes them in a keeper made before.
 */
const STORAGE: StorageShape = {
  meta: { table: "meta", value: "INTEGER" },
  made: "kept_runs",
  schema: SCHEMA,
  steps: [],
};
const KEYS_PURGED = 16;

/**
 * A keeper's storage past which it takes no new async or handed-over run (the caller's 503) until its
 * retention has made room: 8 GiB of the 10 GB a Durable Object's SQLite storage may hold, the rest for
 * the records and keys of waited runs in flight. Issue 41 Must 3: a bound, and a rule past it.
 */
export const KEEPER_STORAGE_BYTES_MAX = 8 * 1024 ** 3;
/** How long each kind of run may wait before the keeper's sweep acts on it (runs/async/sweep.ts). */
const SWEEP_AFTER = {
  queuedMs: QUEUED_MAX_MS,
  runningMs: RUNNING_MAX_MS,
  undeliveredMs: RESULT_DELIVERY_MAX_MS,
  retentionMs: RUN_RETENTION_MS,
  keyMs: IDEMPOTENCY_WINDOW_MS,
};
/**
 * A sweep follows the last one by at least this much (a slice of RUN_SLICE_MAX finished runs purged a
 * second: more than one keeper can take, ~1,000 requests a second and 3 of them a run), and by
 * SWEEP_RETRY_MS after one that failed (D1 or R2 unavailable), never in a loop.
 */
const SWEEP_GAP_MS = 1_000;
const SWEEP_RETRY_MS = 30_000;
/** Requests under one key that may wait for its run at once, beside the one that made it (past it: the caller's 429). */
const JOINED_MAX = 8;

type RunKeyRow = {
  run_id: string;
  request_hash: string;
  status: RunKeyStatus;
};

/** The keeper's logic, apart from the Durable Object class so that it reads as plain code. */
export class Keeper {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;
  /** The runs this object is calling now: their records are theirs; any other record is a lost run's. */
  readonly #live = new Map<string, KeptCall>();
  /** The runs it holds, from admission to their end: what admission counts (`keeperRefusal`). */
  readonly #held = new Map<string, Held>();
  /** Requests under a run's key that joined it and wait for it now (`joined`). */
  readonly #joined = new Map<string, number>();
  /** The alarm's time as this object set it (`null`: none set since it was made, or it has fired). */
  #alarmAt: number | null = null;
  /** Whether the alarm's handler is holding the runs now (it re-arms itself when it ends). */
  #holding = false;
  #idle: (() => void) | null = null;
  #scope: Scope | undefined;
  /** The async and handed-over runs of this keeper's shard (runs/async/kept-runs.ts). */
  readonly runs: KeptRuns;
  /** Whether its alarm sweeps its runs (`OBJECT_SWEEPS`): always but in tests, which sweep with their own clock. */
  sweepsByAlarm: boolean;
  /** Each operation a Worker may ask of `runs` (`runsCall`): `RunRows` and a list's page. */
  readonly #ops: Record<KeptRunsOp, (...args: never[]) => unknown>;
  /** `runs` as every owner of a run reaches it (`RunRows`), for the keeper's own work on them. */
  readonly #rows: ReturnType<typeof keptRunRows>;
  /** `runs` as the sweep reads them (runs/async/sweep.ts). */
  readonly #swept: SweptRuns;

  constructor(
    private readonly state: DurableObjectState,
    private readonly env: Env,
    private readonly deps: Deps,
    private readonly outcomes: OutcomePort,
  ) {
    this.#storage = state.storage;
    this.#sql = state.storage.sql;
    migrateStorage(state.storage, STORAGE);
    this.runs = new KeptRuns(this.#sql, KEEPER_STORAGE_BYTES_MAX);
    this.sweepsByAlarm = getConfig(env).objectSweeps === "alarm";
    // The alarm as set before this object was made (an eviction forgets `#alarmAt`): `#arm` never moves it later.
    void state.blockConcurrencyWhile(async () => {
      this.#alarmAt = await this.#storage.getAlarm();
    });
    const runs = this.runs;
    this.#ops = {
      insert: (run: NewAsyncRun) => {
        const answer = runs.insert(run);
        if (answer === "taken") this.#armSweepFor(dueOfRun(run, SWEEP_AFTER));
        return answer;
      },
      byKey: (caller: string, key: string) => runs.byKey(caller, key),
      releaseKey: (runId: string, before: Date) => runs.releaseKey(runId, before),
      byId: (runId: string) => runs.byId(runId),
      stateById: (runId: string) => runs.stateById(runId),
      storedResult: (runId: string) => runs.storedResult(runId),
      remove: (runId: string) => runs.remove(runId),
      claim: (runId: string, messageId: string, now: Date) => {
        const claimed = runs.claim(runId, messageId, now);
        if (claimed) this.#armSweepFor(dueOfRun(claimed, SWEEP_AFTER));
        return claimed;
      },
      cancel: (appName: string, runId: string, now: Date) => {
        const cancelled = runs.cancel(appName, runId, now);
        if (cancelled) this.#armSweepFor(dueOfRun(cancelled, SWEEP_AFTER));
        return cancelled;
      },
      end: (
        runId: string,
        from: "queued" | "running",
        claimedBy: string | null,
        ending: StoredEnding,
        delivery?: ResultDelivery,
      ) => this.#endRun(runId, from, claimedBy, ending, delivery),
      follow: (runId: string) => runs.follow(runId),
      deliveryNoted: (runId: string, deliveryId: string) => runs.deliveryNoted(runId, deliveryId),
      page: (filter: RunFilter) => runs.page(filter),
    };
    this.#rows = keptRunRows((op, args) => this.runsCall(op, args));
    this.#swept = {
      // A handed-over run this object is calling now is not stale, however long it runs; one it lost
      // (its record is left) is ended from its record (`#interrupted`), with what the record knows.
      stale: async (status, before, limit) => {
        const recorded = new Set(
          this.#sql
            .exec<{ run_id: string }>("SELECT run_id FROM kept_runs")
            .toArray()
            .map((row) => row.run_id),
        );
        return runs
          .stale(status, before, limit + this.#live.size + recorded.size)
          .filter((run) => !this.#live.has(run.id) && !recorded.has(run.id))
          .slice(0, limit);
      },
      undelivered: async (before, limit) => runs.undelivered(before, limit),
      // A delivery recorded with its run's end goes to its lane from the consumer that ended it, or, if
      // that consumer died, from its message's redelivery (consumer.ts): nothing here reads D1's log for it.
      unsent: async () => [],
      expired: async (before, limit) => runs.expired(before, limit),
      removeAll: async (ids) => runs.removeAll(ids),
      releaseKeys: async (before, limit) => runs.releaseKeys(before, limit),
      rowsOf: () => this.#rows,
    };
  }

  /** An operation on the runs this keeper keeps (`KeptRunsOp`, with its arguments as `RunRows` takes them). */
  async runsCall(op: KeptRunsOp, args: unknown[]): Promise<unknown> {
    const run = Object.hasOwn(this.#ops, op) ? (this.#ops[op] as (...args: unknown[]) => unknown) : undefined;
    if (run === undefined) throw new Error(`The keeper has no operation '${op}' on its runs.`);
    return run(...args);
  }

  /**
   * Ends a run (`KeptRuns.end`); with `delivery`, its `pending` record goes to the delivery log after the
   * end (only a run this call ended gets one), then the run notes it. A keeper stopped in between leaves
   * the run without its delivery noted, and its sweep hands the result over again after
   * RESULT_DELIVERY_MAX_MS, finding the record if it was written (runs/async/sweep.ts).
   */
  async #endRun(
    runId: string,
    from: "queued" | "running",
    claimedBy: string | null,
    ending: StoredEnding,
    delivery?: ResultDelivery,
  ): Promise<Ended | undefined> {
    const ended = this.runs.end(runId, from, claimedBy, ending);
    if (ended === undefined) return undefined;
    let recorded = true;
    if (delivery) {
      // A log past its bound: the run's claim writes the record (a run admitted before it filled keeps its delivery).
      if (delivery.row)
        recorded = await recordPending(this.#scopeOf(""), delivery.row).catch((error: unknown) => {
          if (error instanceof DeliveryLogFullError) return false;
          throw error;
        });
      this.runs.deliveryNoted(runId, delivery.deliveryId);
    }
    // Kept for its retention; without its delivery noted here, a result may wait for one (its webhook is
    // not known here: the earlier time, at worst a sweep that finds nothing).
    const finished = ending.finishedAt.getTime();
    const undelivered = !delivery && (ending.status === "succeeded" || ending.status === "failed");
    this.#armSweepFor(
      finished + (undelivered ? Math.min(SWEEP_AFTER.undeliveredMs, SWEEP_AFTER.retentionMs) : SWEEP_AFTER.retentionMs),
    );
    return { ...ended, recorded };
  }

  /**
   * After an event on one run, the sweep's next work that run adds (`due`, `dueOfRun`): while an alarm is
   * set it covers every other row (`#arm` only brings it earlier), so only `due` can bring it earlier;
   * with none, every row is looked at (`#armSweep`). Profiled, that look (five minimums over the runs) at
   * each insert, claim and end was 0.5 ms of SQLite per async run.
   */
  #armSweepFor(due: number | null): void {
    if (!this.sweepsByAlarm) return;
    if (this.#alarmAt === null) this.#armSweep();
    else if (due !== null) this.#arm(due);
  }

  /** Sets the alarm for the sweep's next work (`KeptRuns.nextDue`), not before `notBefore`. */
  #armSweep(notBefore = 0): void {
    if (!this.sweepsByAlarm) return;
    const due = this.runs.nextDue(SWEEP_AFTER);
    if (due !== null) this.#arm(Math.max(due, notBefore));
  }

  /**
   * The sweep of this keeper's runs (runs/async/sweep.ts): what is due at `now()`, a slice of each kind;
   * when to sweep again at the soonest. The alarm's first step; tests call it with their clock (and,
   * to watch what it sends, bindings of their own).
   */
  async sweep(test: { now?: () => Date; bindings?: Partial<Env> } = {}): Promise<number> {
    const deps = { ...this.deps, now: test.now ?? this.deps.now };
    const scope = test.bindings
      ? createScope({ ...this.env, ...test.bindings }, this.state, deps, "sweep")
      : { ...this.#scopeOf("sweep"), deps };
    try {
      await sweepAsyncRuns(scope, this.outcomes, this.#swept, RUN_SLICE_MAX);
      return SWEEP_GAP_MS;
    } catch (error) {
      log("error", "a keeper's sweep of its runs failed: it tries again", { error });
      return SWEEP_RETRY_MS;
    }
  }

  /** The scope of a run's work here: the keeper's own (its config, its D1 client), with the run's request id. */
  #scopeOf(requestId: string): Scope {
    this.#scope ??= createScope(this.env, this.state, this.deps);
    return { ...this.#scope, requestId };
  }

  /**
   * Takes a run: records "called", calls the app, and answers once the caller's answer is ready or the
   * run is handed over. A run is taken once: a second `run` of the same id is refused without a call.
   *
   * Storage: the "called" record is written (with the alarm, when one is needed, in the same commit)
   * before the call is made, and the object's output gate holds the call's request until that commit
   * is durable (no `sync()`: see the decision above). A SQLite write costs the local runtime about half
   * a millisecond of CPU (its commit); the run makes two (this one, and the record's removal at its end).
   */
  async take(appRequest: Request, admitted: AdmittedRun, sentAfterMs: number): Promise<KeeperAnswer> {
    // Checked on arrival: a Worker of another version may hand it over (a gradual deployment).
    const run = admittedRunOf(admitted);
    if (run === null || !isMode(run, "wait")) throw new Error("The keeper takes admitted waited runs only.");
    // The Worker hands each run over once (it never retries this call): the guard is for a run in flight.
    if (this.#held.has(run.runId)) throw new Error(`The keeper has run ${run.runId} already.`);
    const scope = this.#scopeOf(run.requestId);
    const received = Date.now();
    if (run.mode.key) {
      const keyed = this.#keyed(run, sentAfterMs, received);
      if (keyed === "busy") return { kind: "busy", reason: "caller" };
      if (keyed !== null) {
        await appRequest.body?.cancel();
        return { kind: "keyed", runId: keyed.runId, answer: await keyed.answer };
      }
    }
    const reason = keeperRefusal(
      this.#held.values(),
      { caller: run.caller, bytes: run.bytesIn },
      scope.config.keeperRunsMax,
    );
    if (reason !== null) return { kind: "busy", reason };
    // The run's slot (and its key) are taken before the first await: runs arriving meanwhile count it.
    let started!: (call: KeptCall | null) => void;
    const held: Held = {
      caller: run.caller,
      bytes: run.bytesIn,
      handedOver: false,
      call: new Promise((resolve) => (started = resolve)),
    };
    this.#held.set(run.runId, held);
    if (run.mode.key) this.#keep(run, received);
    // Under way from here: taken as a run of its own (a request that joined its key's run is not one).
    this.outcomes.started(scope, startOfAdmitted(run));
    let call: KeptCall;
    try {
      call = await this.#start(scope, appRequest, run, sentAfterMs, received, held);
    } catch (error) {
      // Not started (the delivery's record could not be written): nothing was called; the slot and key are free.
      this.#held.delete(run.runId);
      if (run.mode.key) this.#sql.exec("DELETE FROM run_keys WHERE run_id = ?", run.runId);
      started(null);
      throw error;
    }
    started(call);
    return call.toCaller;
  }

  /**
   * The run a request's key names already, if any: what the request gets instead of a run of its own
   * (`null`: the key is free, the request makes the run). A run this keeper holds is joined; an ended
   * one answered from its key's record; a different request under the key is `reused`.
   */
  #keyed(
    run: AdmittedRunIn<"wait">,
    sentAfterMs: number,
    now: number,
  ): { runId: string; answer: Promise<KeyedAnswer> } | "busy" | null {
    const key = run.mode.key!;
    const row = this.#sql
      .exec<RunKeyRow>(
        "SELECT run_id, request_hash, status FROM run_keys WHERE caller = ? AND key = ? AND created_at > ?",
        run.caller,
        key.value,
        now - IDEMPOTENCY_WINDOW_MS,
      )
      .toArray()[0];
    if (row === undefined) return null;
    const runId = row.run_id;
    if (row.request_hash !== key.requestHash) return { runId, answer: Promise.resolve({ kind: "reused" }) };
    const held = this.#held.get(runId);
    if (held === undefined) return { runId, answer: Promise.resolve(endedAnswer(row.status)) };
    if (this.joined(runId) >= JOINED_MAX) return "busy";
    const until = now + Math.max(0, run.mode.seconds * 1000 - sentAfterMs);
    this.#joined.set(runId, this.joined(runId) + 1);
    const answer = held.call
      .then(async (call): Promise<KeyedAnswer> => {
        if (call === null) return { kind: "run", status: "failed" };
        const joined = await call.join(until);
        return joined.kind === "handed_over" ? { kind: "run", status: "running" } : joined;
      })
      .finally(() => {
        const left = this.joined(runId) - 1;
        if (left === 0) this.#joined.delete(runId);
        else this.#joined.set(runId, left);
      });
    return { runId, answer };
  }

  /** How many requests under run `runId`'s key wait for it now, beside the one that made it. */
  joined(runId: string): number {
    return this.#joined.get(runId) ?? 0;
  }

  /** Records `run` as its key's run (and drops a few keys past their 24 hours). */
  #keep(run: AdmittedRunIn<"wait">, now: number): void {
    const key = run.mode.key!;
    this.#sql.exec(
      `DELETE FROM run_keys WHERE (caller, key) IN
        (SELECT caller, key FROM run_keys WHERE created_at <= ? ORDER BY created_at LIMIT ${KEYS_PURGED})`,
      now - IDEMPOTENCY_WINDOW_MS,
    );
    this.#sql.exec(
      "INSERT OR REPLACE INTO run_keys (caller, key, run_id, request_hash, created_at, status) VALUES (?, ?, ?, ?, ?, 'running')",
      run.caller,
      key.value,
      run.runId,
      key.requestHash,
      now,
    );
  }

  /** Starts a taken run: its delivery on record, "called" in storage, then the app's call. */
  async #start(
    scope: Scope,
    appRequest: Request,
    run: AdmittedRunIn<"wait">,
    sentAfterMs: number,
    received: number,
    held: Held,
  ): Promise<KeptCall> {
    const clock = (wall = Date.now()) => run.acceptedAt + sentAfterMs + (wall - received);
    // The delivery is on record (its secret sealed under its own id) before the app is called, as for a synchronous run.
    const pending = run.webhook ? await this.#deliveryOf(scope, run, run.webhook.endpoint) : null;
    const record: KeptRecord = {
      phase: "called",
      // `path` beside the run for one release: a keeper of the code before reads a record's path there (a rollback).
      run: { ...run, path: outcomePath(run.appPath) } as AdmittedRun,
      target: appRequest.url,
      delivery: pending === null ? null : storedDelivery(pending),
      calledAt: clock(),
      handedOverAt: null,
    };
    // "called", durable before the call is sent.
    this.#sql.exec("INSERT INTO kept_runs (run_id, record) VALUES (?, ?)", run.runId, JSON.stringify(record));
    this.#arm(Date.now() + HOLD_FROM_MS);
    const call = keepCall({
      scope,
      rows: this.#rows,
      run,
      sentAfterMs,
      appRequest: offWire(appRequest, run.runId),
      pending,
      clock,
      handedOver: (at) => {
        held.handedOver = true;
        this.#sql.exec(
          "UPDATE kept_runs SET record = ? WHERE run_id = ?",
          JSON.stringify({ ...record, phase: "handed_over", handedOverAt: at }),
          run.runId,
        );
        // No request of the caller's holds the object now: the alarm does, from now.
        this.#arm(Date.now());
      },
      ended: (outcome) => this.outcomes.ended(scope, outcome),
    });
    this.#live.set(run.runId, call);
    void call.ended.then(
      () => this.#forget(run.runId, call.endedAs()),
      (error: unknown) => {
        // Its end could not be stored (D1 or R2 failing): the next alarm finds its record and ends it `interrupted`.
        log("error", "waited run not ended by its keeper", { run_id: run.runId, error });
        this.#forget(run.runId, null);
        this.#arm(Date.now() + 1_000);
      },
    );
    return call;
  }

  /**
   * The run's delivery, on record before its app is called. Its secret was sealed by the Worker that
   * admitted it: during a rotation of `WEBHOOK_ENCRYPTION_KEY` a keeper on the code before may not open
   * it; then the run goes on without its delivery (`openableWebhookSecret`), as an async run's does.
   */
  async #deliveryOf(scope: Scope, run: AdmittedRun, endpoint: string): Promise<PendingDelivery | null> {
    const opened = await openableWebhookSecret(scope, run);
    if (opened === null) return null;
    return writePendingDelivery(scope, {
      projectId: run.projectId,
      appName: run.appName,
      runId: run.runId,
      endpoint,
      secret: opened.secret,
    });
  }

  /** The caller of `runId` hung up: while it waited, that hands the run over at once. */
  callerLeft(runId: string): void {
    this.#live.get(runId)?.callerLeft();
  }

  /** Sets the alarm for `at` unless one as early is set or the alarm is holding the runs already. */
  #arm(at: number): void {
    if (this.#holding || (this.#alarmAt !== null && this.#alarmAt <= at)) return;
    this.#alarmAt = at;
    void this.#storage.setAlarm(at);
  }

  /**
   * A run is over (`ended`: how, its end stored), or given up to the alarm (`null`): it leaves memory and
   * frees its slot, and its record goes when it ended (its key says how). An object reset before that
   * write is committed leaves it, and the run is then taken for one its keeper lost (docs/runs.md says
   * what that means).
   */
  #forget(runId: string, ended: RunKeyStatus | null): void {
    this.#live.delete(runId);
    this.#held.delete(runId);
    if (ended !== null) {
      this.#sql.exec("DELETE FROM kept_runs WHERE run_id = ?", runId);
      this.#sql.exec("UPDATE run_keys SET status = ? WHERE run_id = ?", ended, runId);
    }
    if (this.#live.size === 0) this.#idle?.();
  }

  /**
   * The alarm: ends the runs a reset object lost (records with no call in memory), then holds the runs
   * in flight while there are any, up to ALARM_HOLD_MS, and re-arms if some remain.
   */
  async alarm(): Promise<void> {
    this.#alarmAt = null;
    this.#holding = true;
    let lost = 0;
    let sweepAgainIn = SWEEP_GAP_MS;
    try {
      // The runs a reset object lost first (their records tell how each ended), so the sweep below never
      // takes one of them for a run left running: it skips runs with a record.
      const rows = this.#sql.exec<{ run_id: string; record: string }>("SELECT run_id, record FROM kept_runs").toArray();
      for (const row of rows) {
        if (this.#live.has(row.run_id)) continue;
        // One record that cannot be ended now (D1 or R2 failing) does not hold up the others: it stays
        // for the next alarm, a second later.
        await this.#interrupted(row.run_id, JSON.parse(row.record) as KeptRecord).catch((error: unknown) => {
          lost++;
          log("error", "a lost waited run not ended by its keeper's alarm: it tries again", {
            run_id: row.run_id,
            error,
          });
        });
      }
      // Then the sweep of its runs: it never throws (a failed one is tried again later, `sweep`).
      if (this.sweepsByAlarm) sweepAgainIn = await this.sweep();
      if (this.#live.size > 0) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          new Promise<void>((resolve) => (this.#idle = resolve)),
          new Promise<void>((resolve) => (timer = setTimeout(resolve, ALARM_HOLD_MS))),
        ]);
        if (timer !== undefined) clearTimeout(timer);
      }
    } finally {
      this.#idle = null;
      this.#holding = false;
      // Set again, whatever happened above: for the runs still held, for a record left, for the sweep.
      if (this.#live.size > 0) this.#arm(Date.now());
      if (lost > 0) this.#arm(Date.now() + 1_000);
      this.#armSweep(Date.now() + sweepAgainIn);
    }
  }

  /** Ends a run this object lost mid-call: stored (and delivered) as `interrupted`, never called again. */
  async #interrupted(runId: string, record: KeptRecord): Promise<void> {
    const run = keptRunOf(record.run);
    if (run === null) {
      // Not a run this code can read: dropped (logged), so the alarm does not meet it again; its key
      // says it failed, and a row it was handed over with is ended by the sweep (runs/async/sweep.ts).
      log("error", "waited run record unreadable", { run_id: runId });
      this.#sql.exec("DELETE FROM kept_runs WHERE run_id = ?", runId);
      this.#sql.exec("UPDATE run_keys SET status = 'failed' WHERE run_id = ?", runId);
      return;
    }
    const scope = this.#scopeOf(run.requestId);
    const pending = record.delivery === null ? null : pendingOf(record.delivery);
    const endedAt = Math.max(this.deps.now().getTime(), record.handedOverAt ?? record.calledAt);
    const message =
      "The run was interrupted: its keeper stopped while the app was working (the platform restarted or evicted it). It is not run again.";
    const error = new ApiError("run_interrupted", message, runMeta(run.runId));
    const text = JSON.stringify(problemBody(error, run.requestId));
    // Its row is here, or in D1 when a keeper of the code before handed it over (an upgrade mid-call).
    const rows = withLegacy(scope.db, this.#rows, d1RunRows(scope.db, run.projectId));
    const ended = await endInterrupted(
      scope,
      rows,
      run,
      record.target,
      pending,
      { calledAt: record.calledAt, handedOverAt: record.handedOverAt, endedAt },
      text,
      message,
    );
    if (ended) {
      if (pending) await handToLane(scope, pending, text);
      const events = runEvents(startOfAdmitted(run), (outcome) => this.outcomes.ended(scope, outcome));
      events.record({ kind: "called", at: record.calledAt });
      if (record.handedOverAt !== null) events.record({ kind: "handed_over", at: record.handedOverAt });
      events.record({ kind: "failed", problem: error });
      events.ended({ at: endedAt, bytesIn: run.bytesIn, bytesOut: 0, webhook: pending !== null });
      log("error", "waited run interrupted", { run_id: run.runId, project_id: run.projectId, phase: record.phase });
    } else if (pending) {
      // Its row had ended before the object stopped (its end stored, its delivery perhaps not yet given
      // to its lane): the recorded delivery goes to its lane now if it was never attempted.
      const row = await rows.byId(run.runId);
      if (row) await handOnAgain(scope, row);
    }
    this.#sql.exec("DELETE FROM kept_runs WHERE run_id = ?", run.runId);
    this.#sql.exec("UPDATE run_keys SET status = 'failed' WHERE run_id = ?", run.runId);
  }
}

/** What a request under the key of an ended run gets: its answer is not kept; a stored run is read at its URL. */
const endedAnswer = (status: RunKeyStatus): KeyedAnswer =>
  status === "answered" ? { kind: "answered" } : { kind: "run", status };

/** A pending delivery as the keeper stores it: without its secret in clear (it is sealed). */
const storedDelivery = ({ secret: _secret, createdAt, ...rest }: PendingDelivery): StoredDelivery => ({
  ...rest,
  createdAt: createdAt.getTime(),
});

/** A stored pending delivery, as `handToLane` takes it. */
const pendingOf = ({ createdAt, ...rest }: StoredDelivery): PendingDelivery => ({
  ...rest,
  secret: undefined,
  createdAt: new Date(createdAt),
});

/**
 * The Durable Object class of the keepers, built from the Worker's `deps` and the root's outcome port
 * (src/index.ts). RPC: `take(appRequest, run, sentAfterMs)`, `callerLeft(runId)`; `run(appRequest, kept)`
 * for one release, for a Worker of the code before (a gradual deployment: a Worker and the objects it
 * calls may run different versions): its run (`KeptRunV1`) taken as the admitted run it stands for.
 */
export function runKeeperClass(deps: Deps, outcomes: OutcomePort) {
  return class RunKeeper extends DurableObject<Env> {
    readonly keeper: Keeper;

    constructor(state: DurableObjectState, env: Env) {
      super(state, env);
      this.keeper = new Keeper(state, env, deps, outcomes);
    }

    take(appRequest: Request, run: AdmittedRun, sentAfterMs: number): Promise<KeeperAnswer> {
      return this.keeper.take(appRequest, run, sentAfterMs);
    }

    /** An operation on the async and handed-over runs it keeps (runs/async/rows.ts `keptRunRows`). */
    runs(op: KeptRunsOp, args: unknown[]): Promise<unknown> {
      return this.keeper.runsCall(op, args);
    }

    /** The RPC of the code before the admitted run (remove once no Worker of it runs). */
    async run(appRequest: Request, kept: unknown): Promise<KeeperAnswer> {
      const config = getConfig(this.env);
      const taken = await admittedOfV1(kept, (runId, secret) => sealSecret(config.webhookEncryptionKey, runId, secret));
      if (taken === null) throw new Error("The keeper takes admitted waited runs only.");
      return this.keeper.take(appRequest, taken.run, taken.sentAfterMs);
    }

    callerLeft(runId: string): void {
      this.keeper.callerLeft(runId);
    }

    override async alarm(): Promise<void> {
      await this.keeper.alarm();
    }
  };
}

export type RunKeeperClass = ReturnType<typeof runKeeperClass>;
export type RunKeeper = InstanceType<RunKeeperClass>;
