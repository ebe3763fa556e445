import { isTimeout, type RunRecord } from "./run-record";
import type { RunEnding, RunMode } from "../runs/outcome";
import { type Histogram, addToHistogram, mergeHistograms, percentileOf, percentileOfSorted } from "./percentiles";
import { hourOf, REFUSAL_REASONS, reasonOf, type RefusalCount } from "./refusals";

/**
 * A project's usage ledger: one Durable Object per project (SQLite storage), the store of its run
 * records (7 days) and their minute rollups (90 days). Runs reach it in batches from each isolate's
 * buffer (src/usage/buffer.ts); the API's runs list and usage figures are its queries, the same code
 * in production, `npm run dev`, the tests and the benchmark. docs/usage.md has the capacity arithmetic.
 *
 * Rollups are exact whatever the volume: every record adds to its (app, minute) row, counts and bytes
 * and a latency histogram. The records themselves are bounded in bytes by `BYTES_MAX` (the object's
 * storage is 10 GB): once the database is that large, one record in `SAMPLE_EVERY` is kept, and past
 * `STOP_FACTOR` times that, none (the rollups still count every run); the answers that read records
 * say so. Every string a record stores is cut to a fixed length (`FIELD_MAX`),
 * so a record's bytes are bounded whatever the caller sent. Requests refused before their app was known
 * are not records: they are counted per hour and reason (`refusals`, src/usage/refusals.ts).
 */

export const RECORDS_RETENTION_MS = 7 * 24 * 3600 * 1000;
export const ROLLUPS_RETENTION_MS = 90 * 24 * 3600 * 1000;
const MINUTE_MS = 60_000;
export const DAY_MS = 24 * 3600 * 1000;
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
/** Percentiles are computed from the records themselves up to this many in a range; past it, from the histograms. */
export const EXACT_MAX = 100_000;
/** Records deleted per statement when purging: a purge never holds the object long. */
const PURGE_CHUNK = 10_000;

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
    PRIMARY KEY (app_name, minute)
  ) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS rollups_minute ON rollups (minute)",
  // Requests refused before their app was known: one row per hour and reason, whatever their number.
  `CREATE TABLE IF NOT EXISTS refusals (
    hour INTEGER NOT NULL,
    reason TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (hour, reason)
  ) WITHOUT ROWID`,
];

/**
 * Changes to the tables of ledgers made before them, in order, each applied once (`meta.schema` counts
 * those applied; a ledger made with SCHEMA as it is now starts with all of them). Only cheap changes:
 * a column added is a change of the table's definition, while a column dropped or a row rewritten is a
 * rewrite of every record, which a full ledger cannot afford in one call. So `timed_out` and `hung_up`
 * stay, written from `ending`, and a record made before `ending` existed reads it from them.
 */
const MIGRATIONS: readonly (readonly string[])[] = [
  // A run's outcome: how it ended, whose failure, its moments after acceptance.
  [
    "ALTER TABLE runs ADD COLUMN ending TEXT",
    "ALTER TABLE runs ADD COLUMN failure TEXT",
    "ALTER TABLE runs ADD COLUMN called_ms INTEGER",
    "ALTER TABLE runs ADD COLUMN answered_ms INTEGER",
    "ALTER TABLE runs ADD COLUMN handed_over_ms INTEGER",
  ],
];

/** A record's ending, for records made before `ending` was kept too. */
const ENDING_SQL =
  "coalesce(ending, CASE WHEN hung_up = 1 THEN 'hung_up' WHEN timed_out = 1 THEN 'timeout' ELSE 'answered' END) AS ending";

/** The columns of a record as the ledger answers it. */
const SELECT_RUNS = `SELECT run_id, app_name, mode, method, path, status_code, ${ENDING_SQL}, failure, duration_ms, ttfb_ms, called_ms, answered_ms, handed_over_ms, bytes_in, bytes_out, caller, webhook, request_id, created_at FROM runs`;

/** A status class as the API names it: every answer below 400 (a WebSocket's 101, an app's redirect) counts as 2xx. */
export type StatusClass = "2xx" | "4xx" | "5xx";
export const classOf = (status: number): StatusClass => (status >= 500 ? "5xx" : status >= 400 ? "4xx" : "2xx");
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
export interface StoredRun extends Omit<RunRecord, "webhook" | "project_id" | "ending"> {
  ending: RunEnding;
  webhook: number;
}

export interface UsageQuery {
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
}

export interface UsageFigures {
  series: UsagePoint[];
  totals: Omit<UsagePoint, "start">;
  /** How p50/p95/p99 were had: from every record (`exact`), or from the rollups' histograms (`histogram`, within 5 %). */
  percentiles: "exact" | "histogram";
  /** Whether records in the range were sampled (the runs list then shows one run in `SAMPLE_EVERY` for that time). */
  sampled: boolean;
  /**
   * Requests refused before their app was known, per reason, in the hours the range touches (counted by
   * the hour); the known reasons with zeros. Empty for one app's figures: a refusal has no app.
   */
  refused: Record<string, number>;
}

interface Roll {
  app_name: string;
  minute: number;
  runs: number;
  status_2xx: number;
  status_4xx: number;
  status_5xx: number;
  timeouts: number;
  bytes_in: number;
  bytes_out: number;
  hist: Histogram;
}

const ms = (value: number) => Math.max(0, Math.round(value));
const msOrNull = (value: number | null) => (value === null ? null : ms(value));

/** Whether a record is kept while sampling: about one run id in SAMPLE_EVERY, by its last two random characters (stable across retries). */
const sampleKeeps = (runId: string) =>
  (runId.charCodeAt(runId.length - 1) * 32 + runId.charCodeAt(runId.length - 2)) % SAMPLE_EVERY === 0;

/** A record with each string cut to its `FIELD_MAX`. */
const bounded = (r: RunRecord): RunRecord => {
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
  #alarmChecked = false;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly bytesMax: number,
  ) {
    this.#sql = storage.sql;
    this.#sql.exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)");
    const made = this.#sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").toArray();
    const recorded = this.#meta("schema");
    let applied = recorded ?? (made.length > 0 ? 0 : MIGRATIONS.length);
    for (const statement of SCHEMA) this.#sql.exec(statement);
    for (; applied < MIGRATIONS.length; applied++)
      for (const statement of MIGRATIONS[applied]!) this.#sql.exec(statement);
    if (recorded !== applied) this.#setMeta("schema", applied);
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
   * Adds a batch: each record once (a batch sent again adds nothing), each to its minute's rollup, and
   * the refusals' counts to their hours. Synchronous from first write to last, so the batch is one
   * transaction of the object's storage. Whether the ledger is full is read once a batch: a batch
   * (at most a queue batch's worth, ~10 MB) is what the bound may be passed by.
   */
  add(records: RunRecord[], refusals: RefusalCount[] = []): { added: number } {
    this.#count(refusals);
    const rolls = new Map<string, Roll>();
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
          isTimeout(r.ending) ? 1 : 0,
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
      const minute = Math.floor(r.created_at / MINUTE_MS) * MINUTE_MS;
      const key = `${minute} ${r.app_name}`;
      let roll = rolls.get(key);
      if (!roll) {
        roll = {
          app_name: r.app_name,
          minute,
          runs: 0,
          status_2xx: 0,
          status_4xx: 0,
          status_5xx: 0,
          timeouts: 0,
          bytes_in: 0,
          bytes_out: 0,
          hist: {},
        };
        rolls.set(key, roll);
      }
      roll.runs++;
      roll[`status_${classOf(r.status_code)}`]++;
      if (isTimeout(r.ending)) roll.timeouts++;
      roll.bytes_in += r.bytes_in;
      roll.bytes_out += r.bytes_out;
      addToHistogram(roll.hist, r.duration_ms);
    }
    this.#setMeta("records", kept);
    for (const roll of rolls.values()) {
      const old = this.#sql
        .exec<{ hist: string }>(
          "SELECT hist FROM rollups WHERE app_name = ? AND minute = ?",
          roll.app_name,
          roll.minute,
        )
        .toArray()[0];
      const hist = old ? mergeHistograms(JSON.parse(old.hist) as Histogram, roll.hist) : roll.hist;
      this.#sql.exec(
        "INSERT INTO rollups (app_name, minute, runs, status_2xx, status_4xx, status_5xx, timeouts, bytes_in, bytes_out, hist) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) " +
          "ON CONFLICT (app_name, minute) DO UPDATE SET runs = runs + excluded.runs, status_2xx = status_2xx + excluded.status_2xx, status_4xx = status_4xx + excluded.status_4xx, " +
          "status_5xx = status_5xx + excluded.status_5xx, timeouts = timeouts + excluded.timeouts, bytes_in = bytes_in + excluded.bytes_in, bytes_out = bytes_out + excluded.bytes_out, hist = ?",
        roll.app_name,
        roll.minute,
        roll.runs,
        roll.status_2xx,
        roll.status_4xx,
        roll.status_5xx,
        roll.timeouts,
        roll.bytes_in,
        roll.bytes_out,
        JSON.stringify(roll.hist),
        JSON.stringify(hist),
      );
    }
    return { added };
  }

  /** Adds refusal counts to their (hour, reason) rows; a reason that is no problem code counts as `other`. */
  #count(refusals: RefusalCount[]): void {
    for (const c of refusals) {
      const count = Math.floor(Number(c.count));
      if (!Number.isFinite(count) || count <= 0 || !Number.isFinite(c.hour)) continue;
      this.#sql.exec(
        "INSERT INTO refusals (hour, reason, count) VALUES (?, ?, ?) ON CONFLICT (hour, reason) DO UPDATE SET count = count + excluded.count",
        hourOf(c.hour),
        reasonOf(String(c.reason)),
        count,
      );
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

  /** Drops records older than 7 days and rollups older than 90 days at `now`; says how many went. */
  purge(now: number): { records: number; rollups: number } {
    // The alarm that called this is spent: the next batch checks again whether one is set.
    this.#alarmChecked = false;
    let records = 0;
    for (;;) {
      const cursor = this.#sql.exec(
        "DELETE FROM runs WHERE run_id IN (SELECT run_id FROM runs WHERE created_at < ? LIMIT ?)",
        now - RECORDS_RETENTION_MS,
        PURGE_CHUNK,
      );
      const gone = cursor.rowsWritten > 0 ? this.#sql.exec<{ n: number }>("SELECT changes() AS n").one().n : 0;
      records += gone;
      if (gone < PURGE_CHUNK) break;
    }
    const rollups = this.#sql.exec("DELETE FROM rollups WHERE minute < ?", now - ROLLUPS_RETENTION_MS);
    const rollupsGone = rollups.rowsWritten > 0 ? this.#sql.exec<{ n: number }>("SELECT changes() AS n").one().n : 0;
    this.#sql.exec("DELETE FROM refusals WHERE hour < ?", now - ROLLUPS_RETENTION_MS);
    this.#setMeta("records", Math.max(0, (this.#meta("records") ?? 0) - records));
    // Sampling that ended before the records' window is history: nothing sampled is left to report.
    const until = this.#meta("sampled_until");
    if (until !== null && until < now - RECORDS_RETENTION_MS) {
      this.#sql.exec("DELETE FROM meta WHERE key IN ('sampled_since', 'sampled_until')");
    }
    return { records, rollups: rollupsGone };
  }

  /** What the ledger holds: records kept, rollup rows, refusal rows, and its database's size in bytes (the object's limit is 10 GB). */
  stats(): { records: number; rollups: number; refusals: number; bytes: number } {
    const rollups = this.#sql.exec<{ n: number }>("SELECT count(*) AS n FROM rollups").one().n;
    const refusals = this.#sql.exec<{ n: number }>("SELECT count(*) AS n FROM refusals").one().n;
    return { records: this.#meta("records") ?? 0, rollups, refusals, bytes: this.#sql.databaseSize };
  }

  /** Whether nothing is left to purge (an idle project's ledger then needs no alarm). */
  isEmpty(): boolean {
    return (
      this.#sql.exec("SELECT 1 FROM rollups LIMIT 1").toArray().length === 0 &&
      this.#sql.exec("SELECT 1 FROM runs LIMIT 1").toArray().length === 0 &&
      this.#sql.exec("SELECT 1 FROM refusals LIMIT 1").toArray().length === 0
    );
  }

  /** Whether records of [from, to) were sampled away. */
  #sampled(from: number, to: number): boolean {
    const since = this.#meta("sampled_since");
    const until = this.#meta("sampled_until");
    return since !== null && until !== null && since < to && until >= from;
  }

  /** One record by its run id (of one of `callers`, when given); `null` when the ledger has none. */
  record(runId: string, callers?: string[]): StoredRun | null {
    const row = this.#sql
      .exec<StoredRun & Record<string, SqlStorageValue>>(`${SELECT_RUNS} WHERE run_id = ?`, runId)
      .toArray()[0];
    return row && (callers === undefined || callers.includes(row.caller)) ? row : null;
  }

  /** A page of runs, newest first (`limit + 1` rows: the extra one says there is a next page). */
  list(q: RecordQuery): { rows: StoredRun[]; sampled: boolean } {
    const where: string[] = [];
    const args: SqlStorageValue[] = [];
    const when = (clause: string, ...values: SqlStorageValue[]) => {
      where.push(clause);
      args.push(...values);
    };
    if (q.app_name !== undefined) when("app_name = ?", q.app_name);
    if (q.mode !== undefined) when("mode = ?", q.mode);
    if (q.status !== undefined) when(CLASS_SQL[q.status]);
    if (q.from !== undefined) when("created_at >= ?", q.from);
    if (q.to !== undefined) when("created_at < ?", q.to);
    if (q.after !== undefined) when("run_id < ?", q.after);
    if (q.callers !== undefined) when(`caller IN (${q.callers.map(() => "?").join(", ") || "NULL"})`, ...q.callers);
    const sql = `${SELECT_RUNS} ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY run_id DESC LIMIT ?`;
    const rows = this.#sql.exec<StoredRun & Record<string, SqlStorageValue>>(sql, ...args, q.limit + 1).toArray();
    return { rows, sampled: this.#sampled(q.from ?? 0, q.to ?? Number.MAX_SAFE_INTEGER) };
  }

  /** The usage series of [from, to) in buckets of `step`, and its totals. */
  usage(q: UsageQuery): UsageFigures {
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
    });
    const series = Array.from({ length: count }, (_, i) => empty(q.from + i * q.step));
    const sums = this.#sql.exec<{
      i: number;
      runs: number;
      s2: number;
      s4: number;
      s5: number;
      t: number;
      bi: number;
      bo: number;
    }>(
      `SELECT CAST((minute - ?) / ? AS INTEGER) AS i, sum(runs) AS runs, sum(status_2xx) AS s2, sum(status_4xx) AS s4, sum(status_5xx) AS s5, sum(timeouts) AS t, sum(bytes_in) AS bi, sum(bytes_out) AS bo
       FROM rollups WHERE minute >= ? AND minute < ?${appClause} GROUP BY i`,
      q.from,
      q.step,
      q.from,
      q.to,
      ...appArgs,
    );
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
      });
    }
    const totalRuns = series.reduce((n, p) => n + p.runs, 0);
    const refused = q.app_name === undefined ? this.#refused(q.from, q.to) : {};
    const sampled = this.#sampled(q.from, q.to);
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
      const rows = this.#sql.exec<{ i: number; hist: string }>(
        `SELECT CAST((minute - ?) / ? AS INTEGER) AS i, hist FROM rollups WHERE minute >= ? AND minute < ?${appClause}`,
        q.from,
        q.step,
        q.from,
        q.to,
        ...appArgs,
      );
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
        refused,
      };
    }
    all.sort((a, b) => a - b);
    return { series, totals: totalsOf(series, percentilesOfSorted(all)), percentiles: "exact", sampled, refused };
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

function totalsOf(series: UsagePoint[], percentiles: Percentiles): Omit<UsagePoint, "start"> {
  const totals = { runs: 0, status_2xx: 0, status_4xx: 0, status_5xx: 0, timeouts: 0, bytes_in: 0, bytes_out: 0 };
  for (const p of series) for (const key of Object.keys(totals) as (keyof typeof totals)[]) totals[key] += p[key];
  return { ...totals, ...percentiles };
}
