import { endedInTimeout, type RunRecord, type RunStartRecord, type StatusClass, whoseFailure } from "./run-record";
import { DAY_MS } from "../platform/time";
import { migrateStorage, type StorageStep } from "../platform/object-storage";
import type { RunEnding, RunMode } from "../runs/outcome";
import { type Histogram, mergeHistograms, percentileOf, percentileOfSorted } from "./percentiles";
import { COUNTERS_IDLE_MS, COUNTERS_SCHEMA, Counters } from "./ledger-counters";
import { hourOf, REFUSAL_REASONS, reasonOf, type RefusalCount } from "./refusals";
import {
  addFailureColumns,
  DERIVE_ROLLUPS_MIGRATION,
  FAILURE_COLUMNS_SQL,
  grainOf,
  ROLLUP_SCHEMA,
  Rollups,
} from "./ledger-rollups";

/**
 * A project's usage ledger: one Durable Object per project (SQLite storage), the store of its run
 * records (7 days) and their rollups by the minute, hour and day (90 days; ledger-rollups.ts), fed in
 * batches by each isolate's buffer (buffer.ts); the runs list and usage figures are its queries. Why,
 * and its bounds: docs/usage.md#where-records-are-kept-and-why, #capacity-arithmetic, #the-worst-query.
 * Every query reads at most `SCAN_MAX` records or one grain's rollups; records are bounded in bytes by
 * `BYTES_MAX` (an object's storage is at most 10 GB), then sampled, and each stored string is cut to `FIELD_MAX`.
 */

export const RECORDS_RETENTION_MS = 7 * DAY_MS;
export const ROLLUPS_RETENTION_MS = 90 * DAY_MS;
/** Past `BYTES_MAX`, one record in this many is kept: at 1,000 runs/s the 7 days then stay within 10 GB (docs/usage.md). */
export const SAMPLE_EVERY = 100;
/** Past `BYTES_MAX` times this (8 GiB by default), no record is kept: whatever the rate, the ledger stays within its object's 10 GB. */
export const STOP_FACTOR = 1.6;
/**
 * The longest string each stored field keeps (characters; cut, never refused): the path as a run's
 * outcome carries it (`OUTCOME_PATH_MAX`, src/runs/outcome.ts), an app name as apps are named (50),
 * a method as long as any registered one, a caller as long as a JWT's subject is useful.
 */
export const FIELD_MAX = {
  run_id: 64,
  app_name: 50,
  mode: 8,
  method: 16,
  path: 256,
  caller: 128,
  request_id: 64,
} as const;
/**
 * Percentiles are computed from the records themselves up to this many in a range; past it, from the
 * histograms (within 5 %). 100,000 took 250–630 ms on the shared machine (sorting and reading every
 * duration), past the worst query's 200 ms goal.
 */
export const EXACT_MAX = 25_000;
/** Records deleted per statement when purging. */
const PURGE_CHUNK = 5_000;
/**
 * Records (and rollup rows, per table) one alarm deletes at most: ~0.1 s of the object's CPU (a
 * million took 4.8–5.5 s here in one statement). A larger backlog is purged across alarms, each
 * setting the next `SLICE_PAUSE_MS` later, so requests interleave and no call outgrows its CPU limit
 * (a call cut short rolls back: one delete of everything would never finish).
 */
export const PURGE_SLICE = 20_000;
export const SLICE_PAUSE_MS = 1_000;
/**
 * Records a runs list examines at most, through one index: a filter that matches few of them answers a
 * short page and a `next_cursor` to go on from where the scan stopped. 100,000 took 205–456 ms on the
 * shared machine (the bench), past the 200 ms goal; a quarter of that keeps the worst list well inside it.
 */
export const SCAN_MAX = 25_000;
/**
 * How long a run stays under way without its record: an owner that died between the run's start and
 * its end (a crashed isolate) leaves a start that no record closes; past this it is no longer shown,
 * and the daily purge drops it. An hour is past any synchronous run's wait for its app (the run timeout)
 * and the 15 minutes of a queue consumer's invocation; a run that streams longer drops off the list
 * and is back, as a record, when it ends.
 */
export const UNDER_WAY_MAX_MS = 3_600_000;
/** Runs under way a ledger keeps at most: past this a start is not kept (its record is, as always). */
export const UNDER_WAY_KEPT_MAX = 10_000;
/** How long after its admission a run may get its id (a body read whole has the run's deadline, far less). */
const ID_SKEW_MS = 3_600_000;

// Numbers are bound as REAL: every bucket index is CAST to an integer, or `(minute - from) / step`
// would be a fraction and no bucket's.
const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    app_name TEXT NOT NULL,
    mode TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    status_code INTEGER NOT NULL,
    timed_out INTEGER NOT NULL,
    hung_up INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    ttfb_ms INTEGER,
    bytes_in INTEGER NOT NULL,
    bytes_out INTEGER NOT NULL,
    caller TEXT NOT NULL,
    webhook INTEGER NOT NULL,
    request_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    ending TEXT,
    failure TEXT,
    called_ms INTEGER,
    answered_ms INTEGER,
    handed_over_ms INTEGER
  ) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS runs_created ON runs (created_at)",
  "CREATE INDEX IF NOT EXISTS runs_app ON runs (app_name, created_at)",
  // The runs list's paths: a service account's own runs, one app's runs, newest first.
  "CREATE INDEX IF NOT EXISTS runs_caller ON runs (caller, run_id)",
  "CREATE INDEX IF NOT EXISTS runs_app_run ON runs (app_name, run_id)",
  `CREATE TABLE IF NOT EXISTS rollups (
    app_name TEXT NOT NULL,
    minute INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    status_2xx INTEGER NOT NULL,
    status_4xx INTEGER NOT NULL,
    status_5xx INTEGER NOT NULL,
    timeouts INTEGER NOT NULL,
    bytes_in INTEGER NOT NULL,
    bytes_out INTEGER NOT NULL,
    hist TEXT NOT NULL,
    ${FAILURE_COLUMNS_SQL},
    PRIMARY KEY (app_name, minute)
  ) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS rollups_minute ON rollups (minute)",
  // Runs admitted whose record has not come yet (a new table: made in old ledgers too, IF NOT EXISTS).
  `CREATE TABLE IF NOT EXISTS under_way (
    run_id TEXT PRIMARY KEY,
    app_name TEXT NOT NULL,
    mode TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    caller TEXT NOT NULL,
    request_id TEXT NOT NULL,
    created_at INTEGER NOT NULL
  ) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS under_way_created ON under_way (created_at)",
  // Requests refused before their app was known: one row per hour and reason, whatever their number.
  `CREATE TABLE IF NOT EXISTS refusals (
    hour INTEGER NOT NULL,
    reason TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (hour, reason)
  ) WITHOUT ROWID`,
  ...ROLLUP_SCHEMA,
  // Counters since each row began (a Prometheus scrape's), new tables: made in old ledgers too.
  ...COUNTERS_SCHEMA,
];

/**
 * Changes to the tables of ledgers made before them, in order, each applied once (`migrateStorage`, its
 * version under `meta.schema`). Only cheap changes: a column added is a change of the table's
 * definition, while a column dropped or a row rewritten is a rewrite of every record, which a full
 * ledger cannot afford in one call. So `timed_out` and `hung_up` stay, written from `ending`, and a
 * record made before `ending` existed reads it from them.
 */
const MIGRATIONS: readonly StorageStep[] = [
  // A run's outcome: how it ended, whose failure, its moments after acceptance.
  [
    "ALTER TABLE runs ADD COLUMN ending TEXT",
    "ALTER TABLE runs ADD COLUMN failure TEXT",
    "ALTER TABLE runs ADD COLUMN called_ms INTEGER",
    "ALTER TABLE runs ADD COLUMN answered_ms INTEGER",
    "ALTER TABLE runs ADD COLUMN handed_over_ms INTEGER",
  ],
  // The hour and day rollups: derived from the minute rollups by the alarm (ledger-rollups.ts). Tables
  // and indexes new to SCHEMA are made by it in old ledgers too (IF NOT EXISTS).
  DERIVE_ROLLUPS_MIGRATION,
  // Failures by whose they were, in every grain's rollups (a step that checks each table: one not made
  // yet is made by today's SCHEMA after the steps, with the columns).
  addFailureColumns,
];

/** A record's ending, for records made before `ending` was kept too. */
const ENDING_SQL =
  "coalesce(ending, CASE WHEN hung_up = 1 THEN 'hung_up' WHEN timed_out = 1 THEN 'timeout' ELSE 'answered' END) AS ending";

/** The columns of a record as the ledger answers it. */
const SELECT_RUNS = `SELECT run_id, app_name, mode, method, path, status_code, ${ENDING_SQL}, failure, duration_ms, ttfb_ms, called_ms, answered_ms, handed_over_ms, bytes_in, bytes_out, caller, webhook, request_id, created_at FROM runs`;

const CLASS_SQL: Record<StatusClass, string> = {
  "2xx": "status_code < 400",
  "4xx": "status_code >= 400 AND status_code < 500",
  "5xx": "status_code >= 500",
};

export interface RecordQuery {
  app_name?: string;
  mode?: RunMode;
  status?: StatusClass;
  from?: number;
  to?: number;
  /** Only the runs of these callers (`undefined`: every caller's). */
  callers?: string[];
  /** The last run id of the previous page. */
  after?: string;
  limit: number;
}

/** A record as the ledger answers it: `webhook` as 0 or 1, as SQLite keeps it. */
export interface LedgerRecord extends Omit<RunRecord, "webhook" | "project_id" | "ending"> {
  ending: RunEnding;
  webhook: number;
}

/** The runs under way a list asks for (`now` bounds their age: `UNDER_WAY_MAX_MS`). */
export interface UnderWayQuery {
  now: number;
  limit: number;
  app_name?: string;
  run_id?: string;
  /** Only the runs of these callers (`undefined`: every caller's). */
  callers?: string[];
}

/** A run under way as the ledger answers it. */
export type StoredStart = Omit<RunStartRecord, "project_id">;

export interface BucketQuery {
  /** Bucket bounds, aligned to `step` by the caller: [from, to). */
  from: number;
  to: number;
  step: number;
  app_name?: string;
  now: number;
}

export interface UsagePoint {
  start: number;
  runs: number;
  status_2xx: number;
  status_4xx: number;
  status_5xx: number;
  timeouts: number;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
  bytes_in: number;
  bytes_out: number;
  /** Failures by whose they were (run-record.ts `whoseFailure`). */
  failures_app: number;
  failures_caller: number;
  failures_gateway: number;
  /** The app's failures over the runs (0 to 1); null without runs. A caller's mistakes do not count. */
  error_rate: number | null;
}

export interface UsageFigures {
  series: UsagePoint[];
  totals: Omit<UsagePoint, "start">;
  /** How p50/p95/p99 were had: from every record (`exact`), or from the rollups' histograms (`histogram`, within 5 %). */
  percentiles: "exact" | "histogram";
  /** Whether records in the range were sampled (the runs list then shows one run in `SAMPLE_EVERY` for that time). */
  sampled: boolean;
  /**
   * One app's figures only: whether they may miss runs of the range, counted in the project's figures
   * alone while the ledger was full (past `STOP_FACTOR` times its bound, no new row of an app is made).
   */
  partial: boolean;
  /**
   * Requests refused before their app was known, per reason, in the hours the range touches (counted by
   * the hour); the known reasons with zeros. Empty for one app's figures: a refusal has no app.
   */
  refused: Record<string, number>;
}

const ms = (value: number) => Math.max(0, Math.round(value));
const msOrNull = (value: number | null) => (value === null ? null : ms(value));

/** Whether a record is kept while sampling: about one run id in SAMPLE_EVERY, by its last two random characters (stable across retries). */
const sampleKeeps = (runId: string) =>
  (runId.charCodeAt(runId.length - 1) * 32 + runId.charCodeAt(runId.length - 2)) % SAMPLE_EVERY === 0;

/** A record (or a start) with each string cut to its `FIELD_MAX`. */
const bounded = <R extends RunStartRecord>(r: R): R => {
  const cut = { ...r };
  for (const field of Object.keys(FIELD_MAX) as (keyof typeof FIELD_MAX)[]) {
    const value = String(r[field]);
    if (value.length > FIELD_MAX[field]) (cut as Record<string, unknown>)[field] = value.slice(0, FIELD_MAX[field]);
  }
  return cut;
};

/** The ledger's logic, apart from the Durable Object class so that it reads as plain code. */
export class Ledger {
  readonly #sql: SqlStorage;
  readonly #rollups: Rollups;
  readonly #counters: Counters;
  #alarmChecked = false;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly bytesMax: number,
    /** Records a runs list examines at most (`SCAN_MAX`; the tests make it small). */
    private readonly scanMax = SCAN_MAX,
  ) {
    this.#sql = storage.sql;
    migrateStorage(storage, {
      meta: { table: "meta", value: "INTEGER" },
      made: "runs",
      schema: SCHEMA,
      steps: MIGRATIONS,
    });
    this.#counters = new Counters(this.#sql);
    this.#rollups = new Rollups(this.#sql, { get: (key) => this.#meta(key), set: (key, v) => this.#setMeta(key, v) });
  }

  #meta(key: string): number | null {
    return this.#sql.exec<{ value: number }>("SELECT value FROM meta WHERE key = ?", key).toArray()[0]?.value ?? null;
  }

  #setMeta(key: string, value: number): void {
    this.#sql.exec(
      "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      key,
      value,
    );
  }

  /**
   * Adds a batch: each record once (a batch sent again adds nothing), each to its rollups, and
   * the refusals' counts to their hours. Synchronous from first write to last, so the batch is one
   * transaction of the object's storage. Whether the ledger is full is read once a batch: a batch
   * (at most a queue batch's worth, ~10 MB) is what the bound may be passed by.
   */
  add(
    records: RunRecord[],
    refusals: RefusalCount[] = [],
    starts: RunStartRecord[] = [],
    now = Date.now(),
  ): { added: number } {
    this.#count(refusals, now);
    this.#start(starts, records);
    let kept = this.#meta("records") ?? 0;
    let added = 0;
    const size = records.length > 0 ? this.#sql.databaseSize : 0;
    const full = size >= this.bytesMax;
    const stopped = size >= this.bytesMax * STOP_FACTOR;
    for (const record of records) {
      const r = bounded(record);
      const keep = !full || (!stopped && sampleKeeps(r.run_id));
      if (keep) {
        const cursor = this.#sql.exec(
          "INSERT INTO runs (run_id, app_name, mode, method, path, status_code, timed_out, hung_up, duration_ms, ttfb_ms, bytes_in, bytes_out, caller, webhook, request_id, created_at, ending, failure, called_ms, answered_ms, handed_over_ms) " +
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING",
          r.run_id,
          r.app_name,
          r.mode,
          r.method,
          r.path,
          r.status_code,
          endedInTimeout(r.ending) ? 1 : 0,
          r.ending === "hung_up" ? 1 : 0,
          ms(r.duration_ms),
          msOrNull(r.ttfb_ms),
          r.bytes_in,
          r.bytes_out,
          r.caller,
          r.webhook ? 1 : 0,
          r.request_id,
          r.created_at,
          r.ending,
          r.failure,
          msOrNull(r.called_ms),
          msOrNull(r.answered_ms),
          msOrNull(r.handed_over_ms),
        );
        if (cursor.rowsWritten === 0) continue;
        kept++;
      } else {
        // Sampled away: the rollup still counts it. The time span of sampling is what the answers report.
        this.#setMeta("sampled_until", Math.max(this.#meta("sampled_until") ?? 0, r.created_at));
        if (this.#meta("sampled_since") === null) this.#setMeta("sampled_since", r.created_at);
      }
      added++;
      const counted = { ...r, timed_out: endedInTimeout(r.ending), whose: whoseFailure(r.failure, r.status_code) };
      this.#rollups.count(counted);
      this.#counters.count(counted);
    }
    this.#setMeta("records", kept);
    // Full: only rows that exist, and the project's, are written (the bound holds for any number of apps).
    const dropped = this.#rollups.write(!stopped);
    if (dropped) {
      this.#setMeta("apps_dropped_until", Math.max(this.#meta("apps_dropped_until") ?? 0, dropped.to));
      this.#setMeta("apps_dropped_since", Math.min(this.#meta("apps_dropped_since") ?? dropped.from, dropped.from));
    }
    this.#counters.write(now, !stopped);
    return { added };
  }

  /**
   * Keeps the batch's starts as runs under way, then closes every run whose record came: a start whose
   * record is in this batch or already held is not kept (a queue message may bring a start after its
   * record). The closing deletes are skipped when nothing is under way (the busy case of short runs,
   * whose starts never left their isolate).
   */
  #start(starts: RunStartRecord[], records: RunRecord[]): void {
    const ended = new Set(records.map((r) => r.run_id));
    let kept = starts.length > 0 ? this.#sql.exec<{ n: number }>("SELECT count(*) AS n FROM under_way").one().n : 0;
    for (const start of starts) {
      if (ended.has(start.run_id) || kept >= UNDER_WAY_KEPT_MAX) continue;
      const s = bounded(start);
      if (this.#sql.exec("SELECT 1 FROM runs WHERE run_id = ?", s.run_id).toArray().length > 0) continue;
      const cursor = this.#sql.exec(
        "INSERT INTO under_way (run_id, app_name, mode, method, path, caller, request_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING",
        s.run_id,
        s.app_name,
        s.mode,
        s.method,
        s.path,
        s.caller,
        s.request_id,
        s.created_at,
      );
      kept += cursor.rowsWritten > 0 ? 1 : 0;
    }
    if (records.length === 0 || this.#sql.exec("SELECT 1 FROM under_way LIMIT 1").toArray().length === 0) return;
    for (const record of records) this.#sql.exec("DELETE FROM under_way WHERE run_id = ?", record.run_id);
  }

  /**
   * The runs under way, newest first: admitted less than `UNDER_WAY_MAX_MS` ago and no record yet (of
   * one app, of one run id, of some callers, as asked).
   */
  underWay(q: UnderWayQuery): StoredStart[] {
    const where = ["created_at >= ?"];
    const args: SqlStorageValue[] = [q.now - UNDER_WAY_MAX_MS];
    if (q.app_name !== undefined) {
      where.push("app_name = ?");
      args.push(q.app_name);
    }
    if (q.run_id !== undefined) {
      where.push("run_id = ?");
      args.push(q.run_id);
    }
    if (q.callers !== undefined) {
      where.push(`caller IN (${q.callers.map(() => "?").join(", ") || "NULL"})`);
      args.push(...q.callers);
    }
    return this.#sql
      .exec<StoredStart & Record<string, SqlStorageValue>>(
        `SELECT run_id, app_name, mode, method, path, caller, request_id, created_at FROM under_way WHERE ${where.join(" AND ")} ORDER BY run_id DESC LIMIT ?`,
        ...args,
        Math.floor(q.limit),
      )
      .toArray();
  }

  /** Adds refusal counts to their (hour, reason) rows; a reason that is no problem code counts as `other`. */
  #count(refusals: RefusalCount[], now: number): void {
    for (const c of refusals) {
      const count = Math.floor(Number(c.count));
      if (!Number.isFinite(count) || count <= 0 || !Number.isFinite(c.hour)) continue;
      this.#sql.exec(
        "INSERT INTO refusals (hour, reason, count) VALUES (?, ?, ?) ON CONFLICT (hour, reason) DO UPDATE SET count = count + excluded.count",
        hourOf(c.hour),
        reasonOf(String(c.reason)),
        count,
      );
      this.#counters.refused(reasonOf(String(c.reason)), count, now);
    }
  }

  /** The refusals of the hours [from, to) touches, per reason (the known ones with zeros). */
  #refused(from: number, to: number): Record<string, number> {
    const refused: Record<string, number> = Object.fromEntries(REFUSAL_REASONS.map((r) => [r, 0]));
    const rows = this.#sql.exec<{ reason: string; n: number }>(
      "SELECT reason, sum(count) AS n FROM refusals WHERE hour >= ? AND hour < ? GROUP BY reason",
      hourOf(from),
      to,
    );
    for (const row of rows) refused[row.reason] = row.n;
    return refused;
  }

  /** The retention purge's alarm, set once a day while the object holds anything (an idle project is purged too). */
  async armPurge(): Promise<void> {
    if (this.#alarmChecked) return;
    this.#alarmChecked = true;
    if ((await this.storage.getAlarm()) === null) await this.storage.setAlarm(Date.now() + DAY_MS);
  }

  /**
   * One slice of the ledger's upkeep at `now`: records older than 7 days and rollups older than 90
   * days dropped, at most `PURGE_SLICE` of each, and a slice of the hour and day rollups' derivation.
   * Says how many went and whether more is left (the alarm then comes back `SLICE_PAUSE_MS` later).
   */
  purge(now: number): { records: number; rollups: number; more: boolean } {
    // The alarm that called this is spent: the next batch checks again whether one is set.
    this.#alarmChecked = false;
    let records = 0;
    while (records < PURGE_SLICE) {
      const cursor = this.#sql.exec(
        "DELETE FROM runs WHERE run_id IN (SELECT run_id FROM runs WHERE created_at < ? LIMIT ?)",
        now - RECORDS_RETENTION_MS,
        Math.min(PURGE_CHUNK, PURGE_SLICE - records),
      );
      const gone = cursor.rowsWritten > 0 ? this.#sql.exec<{ n: number }>("SELECT changes() AS n").one().n : 0;
      records += gone;
      if (gone === 0) break;
    }
    const rollups = this.#rollups.purge(now - ROLLUPS_RETENTION_MS, PURGE_SLICE);
    this.#counters.purge(now - COUNTERS_IDLE_MS);
    this.#sql.exec("DELETE FROM refusals WHERE hour < ?", now - ROLLUPS_RETENTION_MS);
    // Starts no record closed (their owner died): bounded by the concurrency of an hour, one statement.
    this.#sql.exec("DELETE FROM under_way WHERE created_at < ?", now - UNDER_WAY_MAX_MS);
    this.#setMeta("records", Math.max(0, (this.#meta("records") ?? 0) - records));
    // Sampling that ended before the records' window is history: nothing sampled is left to report.
    const until = this.#meta("sampled_until");
    if (until !== null && until < now - RECORDS_RETENTION_MS) {
      this.#sql.exec("DELETE FROM meta WHERE key IN ('sampled_since', 'sampled_until')");
    }
    // Likewise the apps' rows not made while the ledger was full, once that time is past the rollups' retention.
    const dropped = this.#meta("apps_dropped_until");
    if (dropped !== null && dropped < now - ROLLUPS_RETENTION_MS) {
      this.#sql.exec("DELETE FROM meta WHERE key IN ('apps_dropped_since', 'apps_dropped_until')");
    }
    const deriving = this.#rollups.derive(now - ROLLUPS_RETENTION_MS);
    return { records, rollups, more: records >= PURGE_SLICE || rollups >= PURGE_SLICE || deriving };
  }

  /** What the ledger holds: records kept, rollup rows, refusal rows, and its database's size in bytes (the object's limit is 10 GB). */
  stats(): { records: number; rollups: number; refusals: number; bytes: number } {
    const rollups = this.#sql.exec<{ n: number }>("SELECT count(*) AS n FROM rollups WHERE app_name != ''").one().n;
    const refusals = this.#sql.exec<{ n: number }>("SELECT count(*) AS n FROM refusals").one().n;
    return { records: this.#meta("records") ?? 0, rollups, refusals, bytes: this.#sql.databaseSize };
  }

  /** Runs made in [from, to) (minutes touched whole), from the minute rollups: what an export of the range holds at most. */
  runsIn(from: number, to: number, app_name?: string): number {
    const start = Math.floor(from / 60_000) * 60_000;
    const end = Math.max(start + 60_000, Math.ceil(to / 60_000) * 60_000);
    let runs = 0;
    for (const s of this.#rollups.sums("minute", { from: start, to: end, step: end - start, app: app_name }))
      runs += s.runs;
    return runs;
  }

  /** The counters a Prometheus scrape reads: one row per app and mode, one per refusal reason (docs/metrics.md). */
  counters() {
    return this.#counters.read();
  }

  /** Whether nothing is left to purge (an idle project's ledger then needs no alarm). */
  isEmpty(): boolean {
    return (
      this.#sql.exec("SELECT 1 FROM rollups LIMIT 1").toArray().length === 0 &&
      this.#sql.exec("SELECT 1 FROM rollups_day LIMIT 1").toArray().length === 0 &&
      this.#sql.exec("SELECT 1 FROM runs LIMIT 1").toArray().length === 0 &&
      this.#sql.exec("SELECT 1 FROM refusals LIMIT 1").toArray().length === 0 &&
      this.#sql.exec("SELECT 1 FROM under_way LIMIT 1").toArray().length === 0
    );
  }

  /** Whether records of [from, to) were sampled away. */
  #sampled(from: number, to: number): boolean {
    const since = this.#meta("sampled_since");
    const until = this.#meta("sampled_until");
    return since !== null && until !== null && since < to && until >= from;
  }

  /** Whether [from, to) meets intervals whose app rows were not made (the ledger was full). */
  #appsDropped(from: number, to: number): boolean {
    const since = this.#meta("apps_dropped_since");
    const until = this.#meta("apps_dropped_until");
    return since !== null && until !== null && since < to && until > from;
  }

  /** One record by its run id (of one of `callers`, when given); `null` when the ledger has none. */
  record(runId: string, callers?: string[]): LedgerRecord | null {
    const row = this.#sql
      .exec<LedgerRecord & Record<string, SqlStorageValue>>(`${SELECT_RUNS} WHERE run_id = ?`, runId)
      .toArray()[0];
    return row && (callers === undefined || callers.includes(row.caller)) ? row : null;
  }

  /**
   * A page of runs, newest first (`limit + 1` rows: the extra one says there is a next page). The
   * query examines at most `SCAN_MAX` records, newest first, through one index: the caller's (a service
   * account's own runs), else the app's, else the run ids' (which begin with their time, so `from` and
   * `to` bound the scan too); every other filter is applied to what was scanned. When the scan ended
   * before the page was full, `scannedTo` is the last run id examined: the next page goes on below it.
   */
  list(q: RecordQuery): { rows: LedgerRecord[]; sampled: boolean; scannedTo: string | null } {
    const path: string[] = [];
    const pathArgs: SqlStorageValue[] = [];
    const filter: string[] = [];
    const filterArgs: SqlStorageValue[] = [];
    const byPath = (clause: string, ...values: SqlStorageValue[]) => {
      path.push(clause);
      pathArgs.push(...values);
    };
    const byFilter = (clause: string, ...values: SqlStorageValue[]) => {
      filter.push(clause);
      filterArgs.push(...values);
    };
    if (q.callers !== undefined) {
      byPath(`caller IN (${q.callers.map(() => "?").join(", ") || "NULL"})`, ...q.callers);
      if (q.app_name !== undefined) byFilter("app_name = ?", q.app_name);
    } else if (q.app_name !== undefined) byPath("app_name = ?", q.app_name);
    // Ids made after admission: the scan reaches an hour past `to`, and the filter below is exact.
    const upper = [q.after, q.to === undefined ? undefined : idBound(q.to + ID_SKEW_MS)].filter(
      (bound): bound is string => bound !== undefined,
    );
    if (upper.length) byPath("run_id < ?", upper.sort()[0]!);
    if (q.from !== undefined) byPath("run_id >= ?", idBound(q.from));
    if (q.mode !== undefined) byFilter("mode = ?", q.mode);
    if (q.status !== undefined) byFilter(CLASS_SQL[q.status]);
    if (q.from !== undefined) byFilter("created_at >= ?", q.from);
    if (q.to !== undefined) byFilter("created_at < ?", q.to);
    const scan = `SELECT run_id FROM runs ${path.length ? `WHERE ${path.join(" AND ")}` : ""} ORDER BY run_id DESC LIMIT ${Math.floor(this.scanMax)}`;
    const sql = `${SELECT_RUNS} WHERE run_id IN (${scan})${filter.length ? ` AND ${filter.join(" AND ")}` : ""} ORDER BY run_id DESC LIMIT ?`;
    const rows = this.#sql
      .exec<LedgerRecord & Record<string, SqlStorageValue>>(sql, ...pathArgs, ...filterArgs, q.limit + 1)
      .toArray();
    let scannedTo: string | null = null;
    if (rows.length <= q.limit) {
      const scanned = this.#sql
        .exec<{ n: number; last: string | null }>(
          `SELECT count(*) AS n, min(run_id) AS last FROM (${scan})`,
          ...pathArgs,
        )
        .one();
      if (scanned.n >= this.scanMax) scannedTo = scanned.last;
    }
    return { rows, sampled: this.#sampled(q.from ?? 0, q.to ?? Number.MAX_SAFE_INTEGER), scannedTo };
  }

  /** The usage series of [from, to) in buckets of `step`, and its totals. */
  usage(q: BucketQuery): UsageFigures {
    const count = Math.max(0, Math.ceil((q.to - q.from) / q.step));
    const appClause = q.app_name === undefined ? "" : " AND app_name = ?";
    const appArgs = q.app_name === undefined ? [] : [q.app_name];
    const empty = (start: number): UsagePoint => ({
      start,
      runs: 0,
      status_2xx: 0,
      status_4xx: 0,
      status_5xx: 0,
      timeouts: 0,
      p50_ms: null,
      p95_ms: null,
      p99_ms: null,
      bytes_in: 0,
      bytes_out: 0,
      failures_app: 0,
      failures_caller: 0,
      failures_gateway: 0,
      error_rate: null,
    });
    const series = Array.from({ length: count }, (_, i) => empty(q.from + i * q.step));
    const grain = grainOf(q.step, q.from, q.to);
    const rollupQuery = { from: q.from, to: q.to, step: q.step, app: q.app_name };
    const sums = this.#rollups.sums(grain, rollupQuery);
    for (const s of sums) {
      const point = series[s.i];
      if (!point) continue;
      Object.assign(point, {
        runs: s.runs,
        status_2xx: s.s2,
        status_4xx: s.s4,
        status_5xx: s.s5,
        timeouts: s.t,
        bytes_in: s.bi,
        bytes_out: s.bo,
        failures_app: s.fa,
        failures_caller: s.fc,
        failures_gateway: s.fg,
        error_rate: errorRate(s.fa, s.runs),
      });
    }
    const totalRuns = series.reduce((n, p) => n + p.runs, 0);
    const refused = q.app_name === undefined ? this.#refused(q.from, q.to) : {};
    const sampled = this.#sampled(q.from, q.to);
    const partial = q.app_name !== undefined && this.#appsDropped(q.from, q.to);
    const exact = !sampled && q.from >= q.now - RECORDS_RETENTION_MS && totalRuns <= EXACT_MAX;
    const all: number[] = [];
    if (exact) {
      const rows = this.#sql.exec<{ i: number; d: number }>(
        `SELECT CAST((created_at - ?) / ? AS INTEGER) AS i, duration_ms AS d FROM runs WHERE created_at >= ? AND created_at < ?${appClause} ORDER BY d`,
        q.from,
        q.step,
        q.from,
        q.to,
        ...appArgs,
      );
      const per: number[][] = series.map(() => []);
      for (const row of rows) {
        per[row.i]?.push(row.d);
        all.push(row.d);
      }
      per.forEach((durations, i) => Object.assign(series[i]!, percentilesOfSorted(durations)));
    } else {
      const hists: Histogram[] = series.map(() => ({}));
      const rows = this.#rollups.hists(grain, rollupQuery);
      for (const row of rows) {
        const h = hists[row.i];
        if (h) mergeHistograms(h, JSON.parse(row.hist) as Histogram);
      }
      hists.forEach((h, i) => Object.assign(series[i]!, percentilesOfHistogram(h)));
      const total = hists.reduce((acc, h) => mergeHistograms(acc, h), {} as Histogram);
      return {
        series,
        totals: totalsOf(series, percentilesOfHistogram(total)),
        percentiles: "histogram",
        sampled,
        partial,
        refused,
      };
    }
    all.sort((a, b) => a - b);
    return {
      series,
      totals: totalsOf(series, percentilesOfSorted(all)),
      percentiles: "exact",
      sampled,
      partial,
      refused,
    };
  }
}

type Percentiles = Pick<UsagePoint, "p50_ms" | "p95_ms" | "p99_ms">;

const percentilesOfSorted = (sorted: number[]): Percentiles => ({
  p50_ms: percentileOfSorted(sorted, 50),
  p95_ms: percentileOfSorted(sorted, 95),
  p99_ms: percentileOfSorted(sorted, 99),
});

const percentilesOfHistogram = (h: Histogram): Percentiles => ({
  p50_ms: percentileOf(h, 50),
  p95_ms: percentileOf(h, 95),
  p99_ms: percentileOf(h, 99),
});

/** The app's failures over the runs; null without runs. */
export const errorRate = (failures: number, runs: number) => (runs === 0 ? null : failures / runs);

function totalsOf(series: UsagePoint[], percentiles: Percentiles): Omit<UsagePoint, "start"> {
  const totals = {
    runs: 0,
    status_2xx: 0,
    status_4xx: 0,
    status_5xx: 0,
    timeouts: 0,
    bytes_in: 0,
    bytes_out: 0,
    failures_app: 0,
    failures_caller: 0,
    failures_gateway: 0,
  };
  for (const p of series) for (const key of Object.keys(totals) as (keyof typeof totals)[]) totals[key] += p[key];
  return { ...totals, error_rate: errorRate(totals.failures_app, totals.runs), ...percentiles };
}

/** The lowest run id made at `ms` or later (ids begin with their time, 10 characters of Crockford base32). */
function idBound(ms: number): string {
  const alphabet = "0123456789abcdefghjkmnpqrstvwxyz";
  let time = "";
  let t = Math.max(0, Math.min(Math.floor(ms), 32 ** 10 - 1));
  for (let i = 0; i < 10; i++) {
    time = alphabet[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return `run_${time}`;
}
