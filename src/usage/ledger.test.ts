import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { Ledger, RECORDS_RETENTION_MS, ROLLUPS_RETENTION_MS } from "./ledger";
import { ledgerOf } from "./ledger-client";
import type { RunRecord } from "./record";

/** The ledger's store and queries, on the real Durable Object (SQLite storage) of a project. */

const HOUR = 3_600_000;
const MINUTE = 60_000;
let projects = 0;
const newLedger = () => ledgerOf(env, `proj_ledger_${Date.now()}_${projects++}`);

let runs = 0;
function record(at: number, overrides: Partial<RunRecord> = {}): RunRecord {
  return {
    run_id: `run_${at.toString(36).padStart(10, "0")}${(runs++).toString(36).padStart(6, "0")}`,
    project_id: "proj_ledger",
    app_name: "app",
    mode: "sync",
    method: "POST",
    path: "run",
    status_code: 200,
    ending: "answered",
    failure: null,
    duration_ms: 10,
    ttfb_ms: null,
    called_ms: 1,
    answered_ms: 5,
    handed_over_ms: null,
    bytes_in: 1,
    bytes_out: 2,
    caller: "sa:x",
    webhook: false,
    request_id: "req_x",
    created_at: at,
    ...overrides,
  };
}

const nearestRank = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.ceil((p / 100) * values.length) - 1];

describe("the usage ledger", () => {
  it("sums each interval from its minutes, with exact percentiles per interval from the records", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const start = now - 3 * HOUR;
    // Three hours, runs on many minutes of each, durations that differ per hour.
    const records = [0, 1, 2].flatMap((h) =>
      Array.from({ length: 20 }, (_, i) =>
        record(start + h * HOUR + i * 2 * MINUTE + 1234, {
          duration_ms: (h + 1) * 100 + i,
          status_code: i % 10 === 0 ? 503 : i % 5 === 0 ? 404 : 200,
          ending: i === 7 ? "timeout" : "answered",
          bytes_out: 10,
        }),
      ),
    );
    const ledger = newLedger();
    expect(await ledger.add(records)).toEqual({ added: 60 });
    const figures = await ledger.usage({ from: start, to: now, step: HOUR, now });
    expect(figures.percentiles).toBe("exact");
    expect(figures.series.map((p) => p.runs)).toEqual([20, 20, 20]);
    expect(figures.series.map((p) => [p.status_2xx, p.status_4xx, p.status_5xx, p.timeouts, p.bytes_out])).toEqual([
      [16, 2, 2, 1, 200],
      [16, 2, 2, 1, 200],
      [16, 2, 2, 1, 200],
    ]);
    figures.series.forEach((point, h) => {
      const durations = Array.from({ length: 20 }, (_, i) => (h + 1) * 100 + i);
      expect([point.p50_ms, point.p95_ms, point.p99_ms]).toEqual([
        nearestRank(durations, 50),
        nearestRank(durations, 95),
        nearestRank(durations, 99),
      ]);
    });
    const all = records.map((r) => r.duration_ms);
    expect(figures.totals).toMatchObject({ runs: 60, p50_ms: nearestRank(all, 50), p99_ms: nearestRank(all, 99) });
  });

  it("counts a batch sent twice once (a flush that is retried)", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const batch = [record(now - MINUTE), record(now - 2 * MINUTE)];
    const ledger = newLedger();
    await ledger.add(batch);
    expect(await ledger.add(batch)).toEqual({ added: 0 });
    expect(await ledger.stats()).toMatchObject({ records: 2, rollups: 2 });
    expect((await ledger.usage({ from: now - HOUR, to: now, step: HOUR, now })).totals.runs).toBe(2);
    expect((await ledger.list({ limit: 10 })).rows).toHaveLength(2);
  });

  it("answers past the records' 7 days from the rollups' histograms, within 5 %", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const old = now - 10 * 24 * HOUR;
    const durations = Array.from({ length: 200 }, (_, i) => 5 + i * 7);
    const ledger = newLedger();
    await ledger.add(durations.map((d, i) => record(old + i * 1000, { duration_ms: d })));
    const figures = await ledger.usage({ from: old - (old % HOUR), to: now, step: 24 * HOUR, now });
    expect(figures.percentiles).toBe("histogram");
    expect(figures.totals.runs).toBe(200);
    for (const [p, value] of [
      [50, figures.totals.p50_ms],
      [95, figures.totals.p95_ms],
      [99, figures.totals.p99_ms],
    ] as const) {
      const exact = nearestRank(durations, p)!;
      expect(value! / exact, `p${p}`).toBeGreaterThanOrEqual(0.999);
      expect(value! / exact, `p${p}`).toBeLessThanOrEqual(1.05);
    }
  });

  it("samples records past its bound and says so, while the counts stay exact", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const records = Array.from({ length: 400 }, (_, i) => record(now - HOUR + i * 1000));
    const figures = await runInDurableObject(newLedger(), async (_instance, state) => {
      // Bounded at its size once 100 records are in: the next batches are sampled.
      new Ledger(state.storage, Number.MAX_SAFE_INTEGER).add(records.slice(0, 100));
      const ledger = new Ledger(state.storage, state.storage.sql.databaseSize);
      for (let i = 100; i < records.length; i += 50) ledger.add(records.slice(i, i + 50));
      return {
        usage: ledger.usage({ from: now - HOUR, to: now, step: HOUR, now }),
        kept: ledger.list({ limit: 1000 }),
      };
    });
    expect(figures.usage).toMatchObject({ sampled: true, percentiles: "histogram", totals: { runs: 400 } });
    expect(figures.kept.sampled).toBe(true);
    expect(figures.kept.rows.length).toBeGreaterThanOrEqual(100);
    expect(figures.kept.rows.length).toBeLessThan(200);
  });
});

describe("retention", () => {
  it("purges records after 7 days and rollups after 90, from the ledger's daily alarm", async () => {
    const now = Date.now();
    const ledger = newLedger();
    const fresh = record(now - HOUR);
    const week = record(now - RECORDS_RETENTION_MS - HOUR);
    // A day past the rollups' retention: even its day row (kept while any of its day is within the
    // retention) has ended before it, whatever the time of day the test runs at.
    const quarter = record(now - ROLLUPS_RETENTION_MS - 24 * HOUR - HOUR);
    await ledger.add([fresh, week, quarter]);
    // A batch arms the purge a day ahead; the alarm is run now, as the platform would run it then.
    expect(await runInDurableObject(ledger, (_instance, state) => state.storage.getAlarm())).not.toBeNull();
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    const listed = await ledger.list({ limit: 10 });
    expect(listed.rows.map((r) => r.run_id)).toEqual([fresh.run_id]);
    const start = now - ROLLUPS_RETENTION_MS - 24 * HOUR - 2 * HOUR;
    const span = { from: start - (start % HOUR), step: 24 * HOUR, now };
    const usage = await ledger.usage({ ...span, to: span.from + 93 * 24 * HOUR });
    // The week-old run's rollup stays (90 days); the quarter-old one's went.
    expect(usage.totals.runs).toBe(2);
    // Something is left: the alarm is set again for the next day.
    expect(await runInDurableObject(ledger, (_instance, state) => state.storage.getAlarm())).not.toBeNull();
  });
});

describe("the ledger's own migrations", () => {
  it("brings a ledger made before outcomes to the outcome's columns once, its old records reading their ending from their flags", async () => {
    const at = Date.UTC(2026, 10, 21, 12);
    const listed = await runInDurableObject(newLedger(), async (_instance, state) => {
      const sql = state.storage.sql;
      // The object made its tables when it started: gone, as if it had started before outcomes.
      for (const table of ["runs", "rollups", "meta"]) sql.exec(`DROP TABLE ${table}`);
      // The `runs` table as the first ledgers made it, with one record of a caller who hung up.
      sql.exec(`CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, app_name TEXT NOT NULL, mode TEXT NOT NULL, method TEXT NOT NULL, path TEXT NOT NULL,
        status_code INTEGER NOT NULL, timed_out INTEGER NOT NULL, hung_up INTEGER NOT NULL, duration_ms INTEGER NOT NULL,
        ttfb_ms INTEGER, bytes_in INTEGER NOT NULL, bytes_out INTEGER NOT NULL, caller TEXT NOT NULL, webhook INTEGER NOT NULL,
        request_id TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID`);
      // The minute rollups as the first ledgers made them (no failure columns).
      sql.exec(`CREATE TABLE rollups (
        app_name TEXT NOT NULL, minute INTEGER NOT NULL, runs INTEGER NOT NULL, status_2xx INTEGER NOT NULL,
        status_4xx INTEGER NOT NULL, status_5xx INTEGER NOT NULL, timeouts INTEGER NOT NULL, bytes_in INTEGER NOT NULL,
        bytes_out INTEGER NOT NULL, hist TEXT NOT NULL, PRIMARY KEY (app_name, minute)) WITHOUT ROWID`);
      sql.exec("CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)");
      sql.exec(
        "INSERT INTO runs VALUES ('run_0000000000old', 'app', 'sync', 'GET', 'run', 200, 0, 1, 40, 3, 0, 9, 'sa:x', 0, 'req_old', ?)",
        at - MINUTE,
      );
      new Ledger(state.storage, Number.MAX_SAFE_INTEGER);
      // Made again (a restarted object): nothing is applied twice.
      const ledger = new Ledger(state.storage, Number.MAX_SAFE_INTEGER);
      ledger.add([record(at, { ending: "deadline", failure: "gateway:deadline", called_ms: 2, answered_ms: null })]);
      return {
        rows: ledger.list({ limit: 10 }).rows,
        timeouts: ledger.usage({ from: at - HOUR, to: at + HOUR, step: HOUR, now: at }).totals.timeouts,
      };
    });
    expect(listed.rows).toMatchObject([
      { ending: "deadline", failure: "gateway:deadline", called_ms: 2, answered_ms: null },
      { run_id: "run_0000000000old", ending: "hung_up", failure: null, called_ms: null, ttfb_ms: 3 },
    ]);
    // A deadline counts as a timeout, as the gateway's own time limits do.
    expect(listed.timeouts).toBe(1);
  });

  it("splits failures by whose they were, at every grain, and counts each app and mode since its row began", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const at = now - 2 * HOUR + 5 * MINUTE;
    const records = [
      record(at, { mode: "sync" }),
      record(at + 1, { mode: "wait", status_code: 500, failure: "app:500", duration_ms: 70 }),
      record(at + 2, { mode: "async", status_code: 502, ending: "unreachable", failure: "gateway:bad_gateway" }),
      record(at + 3, { status_code: 404, failure: "app:404", duration_ms: 2_000 }),
      record(at + 4, { status_code: 413, ending: "refused", failure: "gateway:payload_too_large" }),
      record(at + 5, { status_code: 504, ending: "deadline", failure: "gateway:run_deadline" }),
      record(at + 6, { status_code: 502, ending: "interrupted", failure: "gateway:run_interrupted" }),
      record(at + 7, { status_code: 499, ending: "hung_up", failure: null, app_name: "other" }),
    ];
    const ledger = newLedger();
    await ledger.add(records);
    await ledger.add(records); // a batch sent again counts nothing twice
    for (const step of [MINUTE, HOUR, 24 * HOUR]) {
      const from = Math.floor((now - 3 * HOUR) / step) * step;
      const { totals } = await ledger.usage({ from, to: from + Math.ceil((3 * HOUR) / step + 1) * step, step, now });
      expect(totals).toMatchObject({ runs: 8, failures_app: 2, failures_caller: 3, failures_gateway: 1 });
      expect(totals.error_rate).toBe(2 / 8);
    }
    const one = await ledger.usage({ from: now - 3 * HOUR, to: now, step: HOUR, now, app_name: "other" });
    expect(one.totals).toMatchObject({ runs: 1, failures_app: 0, error_rate: 0 });

    const { counters, refusals } = await ledger.counters();
    expect(refusals).toEqual([]);
    expect(counters.map((c) => [c.app_name, c.mode, c.runs])).toEqual([
      ["app", "async", 1],
      ["app", "sync", 5],
      ["app", "wait", 1],
      ["other", "sync", 1],
    ]);
    const sync = counters.find((c) => c.app_name === "app" && c.mode === "sync")!;
    expect(sync).toMatchObject({
      failures_app: 0,
      failures_caller: 3,
      failures_gateway: 1,
      bytes_in: 5,
      bytes_out: 10,
    });
    expect(sync.duration_ms_sum).toBe(4 * 10 + 2_000);
    // Buckets: four runs of 10 ms (<= 0.01 s), one of 2 s (<= 2.5 s).
    expect(sync.buckets[1]).toBe(4);
    expect(sync.buckets[8]).toBe(1);
    expect(sync.buckets.reduce((a, b) => a + b, 0)).toBe(5);
  });

  it("a ledger made before the failure columns gains them when it starts, its figures unchanged", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const stub = newLedger();
    const q = { from: now - 2 * HOUR, to: now, step: HOUR, now };
    await stub.add([record(now - HOUR), record(now - HOUR + 1, { status_code: 500, failure: "app:500" })]);
    await runInDurableObject(stub, async (_instance, state) => {
      for (const table of ["rollups", "rollups_hour", "rollups_day"])
        for (const column of ["failures_app", "failures_caller", "failures_gateway"])
          state.storage.sql.exec(`ALTER TABLE ${table} DROP COLUMN ${column}`);
      state.storage.sql.exec("UPDATE meta SET value = 2 WHERE key = 'schema'");
    });
    const after = await runInDurableObject(stub, async (_instance, state) => {
      const ledger = new Ledger(state.storage, Number.MAX_SAFE_INTEGER);
      const before = ledger.usage(q);
      ledger.add([record(now - HOUR + 2, { status_code: 500, failure: "app:500" })]);
      return { before: before.totals, now: ledger.usage(q).totals };
    });
    // Rows made before count no failure (which they were was not kept); runs after count.
    expect(after.before).toMatchObject({ runs: 2, status_5xx: 1, failures_app: 0 });
    expect(after.now).toMatchObject({ runs: 3, status_5xx: 2, failures_app: 1 });
  });
});
