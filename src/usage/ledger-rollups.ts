import { type Histogram, addToHistogram, mergeHistograms } from "./percentiles";
import { DAY_MS, HOUR_MS, MINUTE_MS } from "../platform/time";
import { classOf, type Whose, WHOSE } from "./run-record";

/**
 * The ledger's rollups: counts, status classes, timeouts, bytes and a latency histogram per app and
 * interval, at three grains (minute, hour, day), and the same for the whole project (app `""`: an app
 * name is never empty). A usage query reads the rollups of its own grain and, without `app_name`, the
 * project's rows only: 90 days by the hour is at most 2,160 rows whatever the records or the apps.
 *
 * Ledgers made before the hour and day rollups derive them from their minute rollups, an hour at a time
 * from the ledger's alarm (`derive`), newest first: `rollups_derived_from` (meta) is the oldest hour
 * whose every grain is written. A record of that hour or later is added to all six rows (three grains,
 * its app and the project); an older one to its app's minute only, which its hour's derivation reads
 * later. Each run is so counted once at each grain; until the derivation is done, a query reaching
 * below it reads the minute rollups (as ledgers did before).
 */

export type Grain = "minute" | "hour" | "day";

/** Each grain's table, the column of its interval's start, and its width. */
export const GRAINS: Record<Grain, { table: string; column: string; ms: number }> = {
  minute: { table: "rollups", column: "minute", ms: MINUTE_MS },
  hour: { table: "rollups_hour", column: "start", ms: HOUR_MS },
  day: { table: "rollups_day", column: "start", ms: DAY_MS },
};

/** The project's own rows: every app's runs together. */
export const PROJECT = "";

/** Failures by whose they were (run-record.ts `whoseFailure`), a column each in every grain's rows. */
export const FAILURE_COLUMNS = WHOSE.map((whose) => `failures_${whose}` as const);
export const FAILURE_COLUMNS_SQL = FAILURE_COLUMNS.map((c) => `${c} INTEGER NOT NULL DEFAULT 0`).join(",\n    ");

/**
 * The migration that adds the failure columns to a ledger's rollups made before them: a column at a
 * time, only where the table lacks it (a table made by today's schema in the same start has them all).
 * Rows made before count no failure: which they were was not kept.
 */
export function addFailureColumns(sql: SqlStorage): void {
  for (const { table } of Object.values(GRAINS)) {
    const made = sql
      .exec<{ sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", table)
      .toArray()[0];
    if (!made) continue;
    for (const column of FAILURE_COLUMNS)
      if (!made.sql.includes(column)) sql.exec(`ALTER TABLE ${table} ADD COLUMN ${column} INTEGER NOT NULL DEFAULT 0`);
  }
}

const columns = (column: string) => `app_name TEXT NOT NULL,
    ${column} INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    status_2xx INTEGER NOT NULL,
    status_4xx INTEGER NOT NULL,
    status_5xx INTEGER NOT NULL,
    timeouts INTEGER NOT NULL,
    bytes_in INTEGER NOT NULL,
    bytes_out INTEGER NOT NULL,
    hist TEXT NOT NULL,
    ${FAILURE_COLUMNS_SQL},
    PRIMARY KEY (app_name, ${column})`;

/** The hour and day tables (the minute one is the ledger's first `rollups`). */
export const ROLLUP_SCHEMA = [
  `CREATE TABLE IF NOT EXISTS rollups_hour (${columns("start")}) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS rollups_hour_start ON rollups_hour (start)",
  `CREATE TABLE IF NOT EXISTS rollups_day (${columns("start")}) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS rollups_day_start ON rollups_day (start)",
];

/**
 * The migration of a ledger made before the hour and day rollups: its minute rollups are derived from
 * the next hour down (`derive`); a ledger without rollups has nothing to derive.
 */
export const DERIVE_ROLLUPS_MIGRATION = [
  `INSERT INTO meta (key, value) SELECT 'rollups_derived_from', (unixepoch() / 3600 + 1) * ${HOUR_MS}
   WHERE EXISTS (SELECT 1 FROM rollups) ON CONFLICT (key) DO NOTHING`,
];

/** What a rollup counts of a run. */
export interface Counted {
  app_name: string;
  created_at: number;
  status_code: number;
  timed_out: boolean;
  bytes_in: number;
  bytes_out: number;
  duration_ms: number;
  /** Whose failure the run was; null when nobody's. */
  whose: Whose | null;
}

/** A rollup row as stored. */
interface RollupRow {
  app_name: string;
  start: number;
  runs: number;
  status_2xx: number;
  status_4xx: number;
  status_5xx: number;
  timeouts: number;
  bytes_in: number;
  bytes_out: number;
  failures_app: number;
  failures_caller: number;
  failures_gateway: number;
  hist: string;
}

/** A rollup as `roll` adds it: a row of a grain, its histogram parsed. */
interface Roll extends Omit<RollupRow, "hist"> {
  grain: Grain;
  hist: Histogram;
}

/** Minute rows one `derive` slice reads at most (an hour is read whole, so a slice may pass it by one hour's rows). */
export const DERIVE_SLICE_ROWS = 20_000;

export class Rollups {
  readonly #rolls = new Map<string, Roll>();
  #derivedFrom: number | null = null;

  constructor(
    private readonly sql: SqlStorage,
    private readonly meta: { get(key: string): number | null; set(key: string, value: number): void },
  ) {}

  /** The oldest hour with every grain written (0 once everything is). */
  derivedFrom(): number {
    return this.meta.get("rollups_derived_from") ?? 0;
  }

  #roll(grain: Grain, app: string, at: number): Roll {
    const { ms } = GRAINS[grain];
    const start = Math.floor(at / ms) * ms;
    const key = `${grain} ${start} ${app}`;
    let roll = this.#rolls.get(key);
    if (!roll) {
      roll = {
        grain,
        app_name: app,
        start,
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
        hist: {},
      };
      this.#rolls.set(key, roll);
    }
    return roll;
  }

  /** Counts a run into the rolls of the batch (written by `write`). */
  count(r: Counted): void {
    this.#derivedFrom ??= this.derivedFrom();
    const grainsAndApps: [Grain, string][] =
      r.created_at >= this.#derivedFrom
        ? [
            ["minute", r.app_name],
            ["minute", PROJECT],
            ["hour", r.app_name],
            ["hour", PROJECT],
            ["day", r.app_name],
            ["day", PROJECT],
          ]
        : [["minute", r.app_name]];
    for (const [grain, app] of grainsAndApps) {
      const roll = this.#roll(grain, app, r.created_at);
      roll.runs++;
      roll[`status_${classOf(r.status_code)}`]++;
      if (r.timed_out) roll.timeouts++;
      if (r.whose !== null) roll[`failures_${r.whose}`]++;
      roll.bytes_in += r.bytes_in;
      roll.bytes_out += r.bytes_out;
      addToHistogram(roll.hist, r.duration_ms);
    }
  }

  /** Adds a stored row (of a finer grain) into the rolls of `grain` for `app`. */
  #fold(row: RollupRow, grain: Grain, app: string): void {
    const roll = this.#roll(grain, app, row.start);
    roll.runs += row.runs;
    roll.status_2xx += row.status_2xx;
    roll.status_4xx += row.status_4xx;
    roll.status_5xx += row.status_5xx;
    roll.timeouts += row.timeouts;
    roll.bytes_in += row.bytes_in;
    roll.bytes_out += row.bytes_out;
    for (const column of FAILURE_COLUMNS) roll[column] += row[column];
    mergeHistograms(roll.hist, JSON.parse(row.hist) as Histogram);
  }

  /**
   * Writes the batch's rolls, each added to its row. With `newAppRows` false (the ledger is full: past
   * `STOP_FACTOR` times its bound, ledger.ts) an app's roll is added only to a row it already has: a
   * new app's rows, or an app's new minute, hour or day, are not made, and their runs are counted in the
   * project's rows alone, whose number is bounded by time (1,465 a day) whatever the apps. Answers the
   * span of the intervals whose app rows were not made (`null`: none).
   */
  write(newAppRows = true): { from: number; to: number } | null {
    let from = Infinity;
    let to = -Infinity;
    for (const roll of this.#rolls.values()) {
      const { table, column, ms } = GRAINS[roll.grain];
      const old = this.sql
        .exec<{
          hist: string;
        }>(`SELECT hist FROM ${table} WHERE app_name = ? AND ${column} = ?`, roll.app_name, roll.start)
        .toArray()[0];
      if (!old && !newAppRows && roll.app_name !== PROJECT) {
        from = Math.min(from, roll.start);
        to = Math.max(to, roll.start + ms);
        continue;
      }
      const hist = old ? mergeHistograms(JSON.parse(old.hist) as Histogram, roll.hist) : roll.hist;
      this.sql.exec(
        `INSERT INTO ${table} (app_name, ${column}, runs, status_2xx, status_4xx, status_5xx, timeouts, bytes_in, bytes_out, failures_app, failures_caller, failures_gateway, hist) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ` +
          `ON CONFLICT (app_name, ${column}) DO UPDATE SET runs = runs + excluded.runs, status_2xx = status_2xx + excluded.status_2xx, status_4xx = status_4xx + excluded.status_4xx, ` +
          "status_5xx = status_5xx + excluded.status_5xx, timeouts = timeouts + excluded.timeouts, bytes_in = bytes_in + excluded.bytes_in, bytes_out = bytes_out + excluded.bytes_out, " +
          "failures_app = failures_app + excluded.failures_app, failures_caller = failures_caller + excluded.failures_caller, failures_gateway = failures_gateway + excluded.failures_gateway, hist = excluded.hist",
        roll.app_name,
        roll.start,
        roll.runs,
        roll.status_2xx,
        roll.status_4xx,
        roll.status_5xx,
        roll.timeouts,
        roll.bytes_in,
        roll.bytes_out,
        roll.failures_app,
        roll.failures_caller,
        roll.failures_gateway,
        JSON.stringify(hist),
      );
    }
    this.#rolls.clear();
    this.#derivedFrom = null;
    return from < to ? { from, to } : null;
  }

  /**
   * One slice of the derivation of hour and day rollups (and the project's minutes) from the minute
   * rollups of a ledger made before them: whole hours, newest first, until `DERIVE_SLICE_ROWS` minute
   * rows were read or nothing older than `oldest` is left. Says whether more is left.
   */
  derive(oldest: number): boolean {
    let from = this.derivedFrom();
    let read = 0;
    while (from > 0 && read < DERIVE_SLICE_ROWS) {
      const newest = this.sql
        .exec<{
          m: number | null;
        }>("SELECT max(minute) AS m FROM rollups WHERE minute < ? AND minute >= ? AND app_name != ''", from, oldest)
        .one().m;
      if (newest === null) {
        from = 0;
        break;
      }
      const hour = Math.floor(newest / HOUR_MS) * HOUR_MS;
      const rows = this.sql
        .exec<RollupRow & Record<string, SqlStorageValue>>(
          "SELECT app_name, minute AS start, runs, status_2xx, status_4xx, status_5xx, timeouts, bytes_in, bytes_out, failures_app, failures_caller, failures_gateway, hist FROM rollups WHERE minute >= ? AND minute < ? AND app_name != ''",
          hour,
          hour + HOUR_MS,
        )
        .toArray();
      for (const row of rows) {
        this.#fold(row, "minute", PROJECT);
        for (const grain of ["hour", "day"] as const) {
          this.#fold(row, grain, row.app_name);
          this.#fold(row, grain, PROJECT);
        }
      }
      read += rows.length;
      this.write();
      from = hour;
    }
    this.meta.set("rollups_derived_from", from);
    return from > 0;
  }

  /** Drops rows whose interval ended before `before`, at most `limit` a table; says how many went. */
  purge(before: number, limit: number): number {
    let gone = 0;
    for (const { table, column, ms } of Object.values(GRAINS)) {
      const cursor = this.sql.exec(
        `DELETE FROM ${table} WHERE (app_name, ${column}) IN (SELECT app_name, ${column} FROM ${table} WHERE ${column} < ? ORDER BY ${column} LIMIT ?)`,
        before - ms + 1,
        limit,
      );
      gone += cursor.rowsWritten > 0 ? this.sql.exec<{ n: number }>("SELECT changes() AS n").one().n : 0;
    }
    return gone;
  }

  /**
   * The rows of [from, to) at `grain` for `app` (the project's when undefined), with their interval's
   * index from `from` in steps of `step`. Until the derivation has reached `from`, the minute rollups
   * of every app answer (as before the hour and day rollups).
   */
  #source(grain: Grain, from: number, app: string | undefined) {
    if (from < this.derivedFrom())
      return {
        table: "rollups",
        column: "minute",
        appClause: app === undefined ? "app_name != ''" : "app_name = ?",
        appArgs: app === undefined ? [] : [app],
      };
    const { table, column } = GRAINS[grain];
    return { table, column, appClause: "app_name = ?", appArgs: [app ?? PROJECT] };
  }

  /** The sums of each interval (`i`: its index). Numbers are bound as REAL: the index is CAST to an integer. */
  sums(grain: Grain, q: { from: number; to: number; step: number; app?: string }) {
    const { table, column, appClause, appArgs } = this.#source(grain, q.from, q.app);
    return this.sql.exec<{
      i: number;
      runs: number;
      s2: number;
      s4: number;
      s5: number;
      t: number;
      bi: number;
      bo: number;
      fa: number;
      fc: number;
      fg: number;
    }>(
      `SELECT CAST((${column} - ?) / ? AS INTEGER) AS i, sum(runs) AS runs, sum(status_2xx) AS s2, sum(status_4xx) AS s4, sum(status_5xx) AS s5, sum(timeouts) AS t, sum(bytes_in) AS bi, sum(bytes_out) AS bo,
              sum(failures_app) AS fa, sum(failures_caller) AS fc, sum(failures_gateway) AS fg
       FROM ${table} WHERE ${column} >= ? AND ${column} < ? AND ${appClause} GROUP BY i`,
      q.from,
      q.step,
      q.from,
      q.to,
      ...appArgs,
    );
  }

  /** The histograms of each interval's rows. */
  hists(grain: Grain, q: { from: number; to: number; step: number; app?: string }) {
    const { table, column, appClause, appArgs } = this.#source(grain, q.from, q.app);
    return this.sql.exec<{ i: number; hist: string }>(
      `SELECT CAST((${column} - ?) / ? AS INTEGER) AS i, hist FROM ${table} WHERE ${column} >= ? AND ${column} < ? AND ${appClause}`,
      q.from,
      q.step,
      q.from,
      q.to,
      ...appArgs,
    );
  }
}

/** The grain a series of [from, to) by `step` reads: the widest whose intervals tile each of its buckets. */
export const grainOf = (step: number, from: number, to: number): Grain => {
  const tiles = (ms: number) => step % ms === 0 && from % ms === 0 && to % ms === 0;
  return tiles(DAY_MS) ? "day" : tiles(HOUR_MS) ? "hour" : "minute";
};
