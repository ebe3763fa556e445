import type { RunMode } from "../runs/outcome";
import { DAY_MS } from "../platform/time";
import { classOf, type Whose } from "./run-record";

/**
 * The ledger's counters: what a Prometheus scrape reads (docs/metrics.md). One row per app and mode,
 * counted since the row was made and never lowered, as a Prometheus counter must be (a range of the
 * rollups is not one: its oldest rows are purged): runs by status class, failures by whose, timeouts,
 * bytes, and run durations in fixed buckets. A scrape reads one row per app and mode, whatever the
 * runs; the refusals (a request refused before its app was known) are one row per reason.
 */

/** A run's duration buckets, upper bounds in seconds (Prometheus `le`); a run past the last counts in `+Inf` only. */
export const DURATION_BOUNDS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900] as const;

/** A row unchanged this long (its app ran no run) goes with the rollups' purge: apps deleted do not keep rows. */
export const COUNTERS_IDLE_MS = 90 * DAY_MS;

export const COUNTERS_SCHEMA = [
  `CREATE TABLE IF NOT EXISTS counters (
    app_name TEXT NOT NULL,
    mode TEXT NOT NULL,
    runs INTEGER NOT NULL,
    status_2xx INTEGER NOT NULL,
    status_4xx INTEGER NOT NULL,
    status_5xx INTEGER NOT NULL,
    timeouts INTEGER NOT NULL,
    failures_app INTEGER NOT NULL,
    failures_caller INTEGER NOT NULL,
    failures_gateway INTEGER NOT NULL,
    bytes_in INTEGER NOT NULL,
    bytes_out INTEGER NOT NULL,
    duration_ms_sum INTEGER NOT NULL,
    buckets TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (app_name, mode)
  ) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS refusal_counters (
    reason TEXT PRIMARY KEY,
    count INTEGER NOT NULL,
    created_at INTEGER NOT NULL
  ) WITHOUT ROWID`,
];

/** One app and mode's counters. `buckets[i]`: runs of at most `DURATION_BOUNDS_S[i]` s and more than the bound before; the last, past every bound. */
export interface CounterRow {
  app_name: string;
  mode: RunMode;
  runs: number;
  status_2xx: number;
  status_4xx: number;
  status_5xx: number;
  timeouts: number;
  failures_app: number;
  failures_caller: number;
  failures_gateway: number;
  bytes_in: number;
  bytes_out: number;
  duration_ms_sum: number;
  buckets: number[];
  /** Epoch ms: when the row (and so its counters) began. */
  created_at: number;
}

export interface RefusalCounter {
  reason: string;
  count: number;
  created_at: number;
}

/** What a counter counts of a run. */
export interface CountedRun {
  app_name: string;
  mode: RunMode;
  status_code: number;
  timed_out: boolean;
  whose: Whose | null;
  bytes_in: number;
  bytes_out: number;
  duration_ms: number;
}

const bucketOf = (ms: number) => {
  const i = DURATION_BOUNDS_S.findIndex((bound) => ms <= bound * 1000);
  return i === -1 ? DURATION_BOUNDS_S.length : i;
};

const zero = (app_name: string, mode: RunMode, now: number): CounterRow => ({
  app_name,
  mode,
  runs: 0,
  status_2xx: 0,
  status_4xx: 0,
  status_5xx: 0,
  timeouts: 0,
  failures_app: 0,
  failures_caller: 0,
  failures_gateway: 0,
  bytes_in: 0,
  bytes_out: 0,
  duration_ms_sum: 0,
  buckets: new Array<number>(DURATION_BOUNDS_S.length + 1).fill(0),
  created_at: now,
});

const SUMMED = [
  "runs",
  "status_2xx",
  "status_4xx",
  "status_5xx",
  "timeouts",
  "failures_app",
  "failures_caller",
  "failures_gateway",
  "bytes_in",
  "bytes_out",
  "duration_ms_sum",
] as const;

export class Counters {
  readonly #batch = new Map<string, CounterRow>();

  constructor(private readonly sql: SqlStorage) {}

  /** Counts a run into the batch (written by `write`). */
  count(r: CountedRun): void {
    const key = `${r.mode} ${r.app_name}`;
    let row = this.#batch.get(key);
    if (!row) this.#batch.set(key, (row = zero(r.app_name, r.mode, 0)));
    row.runs++;
    row[`status_${classOf(r.status_code)}`]++;
    if (r.timed_out) row.timeouts++;
    if (r.whose !== null) row[`failures_${r.whose}`]++;
    row.bytes_in += r.bytes_in;
    row.bytes_out += r.bytes_out;
    row.duration_ms_sum += Math.max(0, Math.round(r.duration_ms));
    row.buckets[bucketOf(r.duration_ms)]!++;
  }

  /**
   * Adds the batch to the stored rows (made at `now` when new). A full ledger (`newRows` false, the
   * rollups' rule: docs/usage.md) makes no new row: an app's first runs past the bound are not counted.
   */
  write(now: number, newRows = true): void {
    for (const add of this.#batch.values()) {
      const old = this.sql
        .exec<Record<string, SqlStorageValue>>(
          "SELECT * FROM counters WHERE app_name = ? AND mode = ?",
          add.app_name,
          add.mode,
        )
        .toArray()[0];
      if (!old && !newRows) continue;
      const row = old ? rowOf(old) : zero(add.app_name, add.mode, now);
      for (const key of SUMMED) row[key] += add[key];
      row.buckets = row.buckets.map((n, i) => n + (add.buckets[i] ?? 0));
      this.sql.exec(
        `INSERT INTO counters (app_name, mode, ${SUMMED.join(", ")}, buckets, created_at, updated_at) VALUES (?, ?, ${SUMMED.map(() => "?").join(", ")}, ?, ?, ?) ` +
          `ON CONFLICT (app_name, mode) DO UPDATE SET ${SUMMED.map((k) => `${k} = excluded.${k}`).join(", ")}, buckets = excluded.buckets, updated_at = excluded.updated_at`,
        row.app_name,
        row.mode,
        ...SUMMED.map((k) => row[k]),
        JSON.stringify(row.buckets),
        row.created_at,
        now,
      );
    }
    this.#batch.clear();
  }

  /** Adds refusals of `reason`. */
  refused(reason: string, count: number, now: number): void {
    this.sql.exec(
      "INSERT INTO refusal_counters (reason, count, created_at) VALUES (?, ?, ?) ON CONFLICT (reason) DO UPDATE SET count = count + excluded.count",
      reason,
      count,
      now,
    );
  }

  /** Every row: one per app and mode, one per refusal reason. */
  read(): { counters: CounterRow[]; refusals: RefusalCounter[] } {
    const counters = this.sql
      .exec<Record<string, SqlStorageValue>>("SELECT * FROM counters ORDER BY app_name, mode")
      .toArray()
      .map(rowOf);
    const refusals = this.sql
      .exec<{ reason: string; count: number; created_at: number }>(
        "SELECT reason, count, created_at FROM refusal_counters ORDER BY reason",
      )
      .toArray();
    return { counters, refusals };
  }

  /** Drops the rows of apps that ran nothing since `before`. */
  purge(before: number): void {
    this.sql.exec("DELETE FROM counters WHERE updated_at < ?", before);
  }
}

function rowOf(stored: Record<string, SqlStorageValue>): CounterRow {
  const row = { ...stored } as unknown as CounterRow & { buckets: unknown; updated_at?: number };
  const buckets = JSON.parse(String(stored.buckets)) as number[];
  delete row.updated_at;
  return { ...row, buckets };
}
