import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { consume, startAsync } from "../../test/async-runs";
import { callWith, seedRunnable } from "../../test/runs";
import { recordingStorage } from "../../test/storage";
import {
  EXACT_MAX,
  FIELD_MAX,
  Ledger,
  PURGE_SLICE,
  RECORDS_RETENTION_MS,
  ROLLUPS_RETENTION_MS,
  STOP_FACTOR,
  type BucketQuery,
} from "./ledger";
import { ledgerOf } from "./ledger-client";
import type { RunRecord } from "./run-record";

/** The usage ledger against callers who would fill it or bend it (issue 33). */

const api = client();
const LONG_PATH = "p".repeat(8_000);

/** Every row the project's ledger holds, as text, and what it holds. */
async function ledgerOfProject(projectId: string) {
  const stub = ledgerOf(env, projectId);
  const text = await runInDurableObject(stub, async (_instance, state) => {
    const tables = state.storage.sql
      .exec<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\'",
      )
      .toArray();
    return JSON.stringify(tables.map(({ name }) => state.storage.sql.exec(`SELECT * FROM "${name}"`).toArray()));
  });
  return { text, stats: await stub.stats() };
}

async function refusedOf(projectId: string, token: string) {
  const res = await api.json<{ totals: { runs: number; refused: Record<string, number> } }>(
    `/v2/projects/${projectId}/usage`,
    { token },
  );
  expect(res.status).toBe(200);
  return res.body.totals;
}

describe("attack: refused runs fill the ledger (33.1)", () => {
  it("a caller over the project's run budget, inventing app names and 8 KB paths, writes no record and no rollup row: its 429s are counted, in one row", async () => {
    const app = await seedRunnable(api);
    // The project's budget spent (the real limiter's spending is src/runs/rate-limits.test.ts's).
    const spent = { RATE_LIMIT_RUNS: { limit: async () => ({ success: false }) } as RateLimit };
    const refuse = (i: number) =>
      callWith(api, spent, `/v4/${app.projectId}/invented-${i}/${LONG_PATH}`, { token: app.token });
    expect((await refuse(0)).status).toBe(429);
    const after = await ledgerOfProject(app.projectId);
    for (let i = 1; i < 20; i++) expect((await refuse(i)).status).toBe(429);
    const held = await ledgerOfProject(app.projectId);
    expect(held.text).not.toContain("invented");
    expect(held.text).not.toContain("ppp");
    expect(held.stats).toMatchObject({ records: 0, rollups: 0, refusals: 1 });
    // Twenty refusals take what one took: the ledger does not grow with them.
    expect(held.stats.bytes).toBe(after.stats.bytes);
    expect(await refusedOf(app.projectId, app.token)).toMatchObject({
      runs: 0,
      refused: { rate_limited: 20, not_found: 0 },
    });
  });

  it("a caller naming apps the project does not have writes no record: its 404s are counted, never the names", async () => {
    const app = await seedRunnable(api);
    for (let i = 0; i < 5; i++) {
      const missing = await api.call(`/v4/${app.projectId}/invented-${i}/${LONG_PATH}`, { token: app.token });
      expect(missing.status).toBe(404);
    }
    const held = await ledgerOfProject(app.projectId);
    expect(held.text).not.toContain("invented");
    expect(held.stats).toMatchObject({ records: 0, rollups: 0, refusals: 1 });
    expect(await refusedOf(app.projectId, app.token)).toMatchObject({ refused: { rate_limited: 0, not_found: 5 } });
    // One app's figures: a refusal has no app.
    const oneApp = await api.json<{ totals: { refused: Record<string, number> } }>(
      `/v2/projects/${app.projectId}/usage?app_name=${app.appName}`,
      { token: app.token },
    );
    expect(oneApp.body.totals.refused).toEqual({});
  });

  it("a run of a known app with an 8 KB path is on record with its path cut to 256 characters", async () => {
    const app = await seedRunnable(api, undefined, "custom");
    const res = await api.call(`${app.appPath}/${LONG_PATH}`, { token: app.token });
    await res.text();
    const runs = await api.json<{ data: { path: string }[] }>(`/v2/projects/${app.projectId}/runs`, {
      token: app.token,
    });
    expect(runs.body.data).toHaveLength(1);
    expect(runs.body.data[0]!.path).toBe(LONG_PATH.slice(0, FIELD_MAX.path));
  });

  it("bounds the ledger in bytes: past the bound records are sampled, past 1.6 times it none are kept, and the counts stay exact", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const stub = ledgerOf(env, `proj_bytes_${Date.now()}`);
    const kept = await runInDurableObject(stub, async (_instance, state) => {
      // Worst-case records: every string at its bound.
      const worst = (i: number): RunRecord => ({
        run_id: `run_${"z".repeat(FIELD_MAX.run_id - 12)}${i.toString(36).padStart(8, "0")}`,
        project_id: "proj",
        app_name: "a".repeat(FIELD_MAX.app_name + 50),
        mode: "sync",
        method: "M".repeat(5_000),
        path: "p".repeat(8_000),
        status_code: 429,
        ending: "interrupted",
        failure: "gateway:idempotency_key_reused",
        duration_ms: 1,
        ttfb_ms: 1,
        called_ms: 1,
        answered_ms: 1,
        handed_over_ms: 1,
        bytes_in: 0,
        bytes_out: 0,
        caller: `jwt:${"s".repeat(5_000)}`,
        webhook: false,
        request_id: "r".repeat(500),
        created_at: now + i,
      });
      const empty = new Ledger(state.storage, Number.MAX_SAFE_INTEGER);
      const before = state.storage.sql.databaseSize;
      empty.add(Array.from({ length: 2_000 }, (_, i) => worst(i)));
      const perRecord = (state.storage.sql.databaseSize - before) / 2_000;
      // docs/usage.md states the worst case per record from this figure.
      expect(perRecord).toBeLessThan(1_400);
      // A bound just past the present size: the next batch is sampled (about one in a hundred kept).
      const bounded = new Ledger(state.storage, state.storage.sql.databaseSize);
      const records = state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM runs").one().n;
      bounded.add(Array.from({ length: 2_000 }, (_, i) => worst(10_000 + i)));
      const sampled = state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM runs").one().n - records;
      // Past STOP_FACTOR times the bound, none: the rollups alone count the runs.
      const stopped = new Ledger(state.storage, Math.floor(state.storage.sql.databaseSize / STOP_FACTOR));
      stopped.add(Array.from({ length: 2_000 }, (_, i) => worst(20_000 + i)));
      const after = state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM runs").one().n;
      const counted = stopped.usage({ from: now - 60_000, to: now + 3_600_000, step: 3_600_000, now }).totals.runs;
      return { sampled, stoppedKept: after - records - sampled, counted };
    });
    expect(kept.sampled).toBeGreaterThan(0);
    expect(kept.sampled).toBeLessThan(100);
    expect(kept.stoppedKept).toBe(0);
    expect(kept.counted).toBe(6_000);
  });
});

interface Listed {
  run_id: string;
  status_code: number;
  bytes_in: number;
}

async function listed(app: { projectId: string; token: string }) {
  const res = await api.json<{ data: Listed[] }>(`/v2/projects/${app.projectId}/runs`, { token: app.token });
  expect(res.status).toBe(200);
  return res.body.data;
}

describe("attack: an Idempotency-Key clash erases the real run's record (33.2)", () => {
  it("a second request under the run's Idempotency-Key (422) is a record of its own: the run's own record, written when it ends, stands", async () => {
    const app = await seedRunnable(api);
    const key = { "Idempotency-Key": `clash-${Date.now()}` };
    const first = await startAsync(api, app, { body: { inputs: { n: 1 } }, headers: key });
    expect(first.response.status).toBe(202);
    api.clock.advance(1);
    const clash = await startAsync(api, app, { body: { inputs: { n: 2 } }, headers: key });
    expect(clash.response.status).toBe(422);
    expect(await consume(api, first.message)).toMatchObject({ acked: true });
    const runs = await listed(app);
    expect(runs.find((r) => r.run_id === first.body.run_id)).toMatchObject({ status_code: 200 });
    expect(runs.filter((r) => r.status_code === 422)).toHaveLength(1);
    expect(runs.find((r) => r.status_code === 422)!.run_id).not.toBe(first.body.run_id);
    const usage = await api.json<{ totals: { status_2xx: number; status_4xx: number } }>(
      `/v2/projects/${app.projectId}/usage`,
      { token: app.token },
    );
    expect(usage.body.totals).toMatchObject({ status_2xx: 1, status_4xx: 1 });
  });
});

describe("attack: bytes in taken from Content-Length (33.3)", () => {
  it("Content-Length: 500000000 with a 1-byte body is a 413 on record with the bytes that crossed (none), not the header's claim", async () => {
    const app = await seedRunnable(api);
    const big = await api.call(app.runPath, {
      method: "POST",
      token: app.token,
      rawBody: "{",
      headers: { "Content-Type": "application/json", "Content-Length": "500000000" },
    });
    expect(big.status).toBe(413);
    expect(await listed(app)).toMatchObject([{ status_code: 413, bytes_in: 0 }]);
    const usage = await api.json<{ totals: { bytes_in: number } }>(`/v2/projects/${app.projectId}/usage`, {
      token: app.token,
    });
    expect(usage.body.totals.bytes_in).toBe(0);
  });

  it("a custom app's body declared as 100,000 bytes that breaks off after 10 is not counted as 100,000", async () => {
    const app = await seedRunnable(api, undefined, "custom");
    // A caller who breaks off: its body errors (a connection lost), as the runtime's does.
    let sent = false;
    const short = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent) return controller.error(new Error("connection lost"));
        sent = true;
        controller.enqueue(new TextEncoder().encode("0123456789"));
      },
    });
    const res = await api.call(`${app.appPath}/upload`, {
      method: "POST",
      token: app.token,
      rawBody: short,
      headers: { "Content-Type": "application/octet-stream", "Content-Length": "100000" },
    });
    await res.text();
    const [run] = await listed(app);
    expect(run!.bytes_in).toBeLessThanOrEqual(10);
  });

  it("a body refused after it was read (415) is on record with the bytes read, whatever Content-Length claimed", async () => {
    const app = await seedRunnable(api);
    const body = "x".repeat(1_000);
    const refused = await api.call(app.runPath, {
      method: "POST",
      token: app.token,
      rawBody: body,
      headers: { "Content-Type": "text/plain" },
    });
    expect(refused.status).toBe(415);
    expect(await listed(app)).toMatchObject([{ status_code: 415, bytes_in: 1_000 }]);
  });
});

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

let made = 0;
/** A record of `app` at `at`, with a run id that begins with its time as the gateway's do. */
function recordAt(at: number, app: string, overrides: Partial<RunRecord> = {}): RunRecord {
  const alphabet = "0123456789abcdefghjkmnpqrstvwxyz";
  let time = "";
  for (let t = at, i = 0; i < 10; i++, t = Math.floor(t / 32)) time = alphabet[t % 32] + time;
  const n = (made++).toString(32).padStart(20, "0");
  return {
    run_id: `run_${time}${n}`,
    project_id: "proj_q",
    app_name: app,
    mode: "sync",
    method: "POST",
    path: "run",
    status_code: 200,
    ending: "answered",
    failure: null,
    duration_ms: 20 + (made % 50),
    ttfb_ms: null,
    called_ms: 1,
    answered_ms: 5,
    handed_over_ms: null,
    bytes_in: 1,
    bytes_out: 2,
    caller: "sa:other",
    webhook: false,
    request_id: "req_q",
    created_at: at,
    ...overrides,
  };
}

/** The ledger's storage with every row its statements read counted (`rowsRead` of each cursor). */
function countingStorage(storage: DurableObjectStorage) {
  const recording = recordingStorage(storage);
  return {
    storage: recording.storage,
    reset: () => void recording.execs.splice(0),
    rowsRead: () => recording.execs.reduce((n, e) => n + e.cursor.rowsRead, 0),
  };
}

describe("attack: queries any usage:read holder can make expensive (33.4)", () => {
  it("a 90-day hourly or daily usage query reads rollups of its own grain: the rows read do not grow with the project's apps", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const from = now - 90 * DAY;
    const read = await runInDurableObject(ledgerOf(env, `proj_q_${Date.now()}`), async (_instance, state) => {
      const counting = countingStorage(state.storage);
      const ledger = new Ledger(counting.storage, Number.MAX_SAFE_INTEGER);
      const figures = (q: Omit<BucketQuery, "now">) => {
        counting.reset();
        const answer = ledger.usage({ ...q, now });
        return { answer, rows: counting.rowsRead() };
      };
      const hourly = { from, to: now, step: HOUR };
      const daily = { from, to: now, step: DAY };
      const byMinute = { from: now - 36 * HOUR, to: now, step: MINUTE };
      // Runs every 6 hours for 90 days, and some by the minute: first of 2 apps, then of 40.
      const seed = (apps: number) => {
        const records: RunRecord[] = [];
        for (let at = from + 17 * MINUTE; at < now; at += 6 * HOUR)
          for (let a = 0; a < apps; a++) records.push(recordAt(at + a, `app-${a}`));
        for (let at = now - 36 * HOUR + 7_000; at < now; at += 30 * MINUTE)
          for (let a = 0; a < apps; a++) records.push(recordAt(at + a, `app-${a}`));
        for (let i = 0; i < records.length; i += 2_000) ledger.add(records.slice(i, i + 2_000));
        return records.length;
      };
      const few = seed(2);
      const small = { hourly: figures(hourly), daily: figures(daily), byMinute: figures(byMinute) };
      const many = seed(38) + few;
      const large = { hourly: figures(hourly), daily: figures(daily), byMinute: figures(byMinute) };
      return { few, many, small, large };
    });
    expect(read.large.hourly.answer.totals.runs).toBe(read.many);
    expect(read.large.daily.answer.totals.runs).toBe(read.many);
    expect(read.small.hourly.answer.totals.runs).toBe(read.few);
    for (const q of ["hourly", "daily"] as const) {
      // Twenty times the apps, the same rows: the project's own rollups of the query's grain.
      expect(read.large[q].rows, q).toBe(read.small[q].rows);
      expect(read.large[q].rows, q).toBeLessThanOrEqual(2 * 2_160 + 10);
    }
    // 36 hours by the minute: the project's minute rollups, and the records for exact percentiles
    // (at most EXACT_MAX of them: past it, the histograms).
    expect(read.large.byMinute.answer.percentiles).toBe("exact");
    expect(read.large.byMinute.rows).toBeLessThanOrEqual(EXACT_MAX + 2 * 2_160 + 10);
  }, 120_000);

  it("a runs list whose filters match little examines at most its scan bound, and goes on with a cursor", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const result = await runInDurableObject(ledgerOf(env, `proj_scan_${Date.now()}`), async (_instance, state) => {
      const counting = countingStorage(state.storage);
      const ledger = new Ledger(counting.storage, Number.MAX_SAFE_INTEGER, 100);
      // 1,000 runs; the one 5xx is the oldest, the service account's own one among them too.
      const records = Array.from({ length: 1_000 }, (_, i) =>
        recordAt(now - (1_000 - i) * 1_000, "busy", i === 0 ? { status_code: 503 } : {}),
      );
      records[500] = { ...records[500]!, caller: "sa:mine" };
      ledger.add(records);
      const pages: { runs: number; rows: number }[] = [];
      let after: string | undefined;
      let found: string[] = [];
      for (;;) {
        counting.reset();
        const page = ledger.list({ status: "5xx", limit: 10, after });
        pages.push({ runs: page.rows.length, rows: counting.rowsRead() });
        found = [...found, ...page.rows.map((r) => r.run_id)];
        const next = page.rows.length > 10 ? page.rows[9]!.run_id : page.scannedTo;
        if (next === null) break;
        after = next;
      }
      counting.reset();
      const own = ledger.list({ callers: ["sa:mine"], limit: 10 });
      return { pages, found, own: own.rows.map((r) => r.caller), ownRows: counting.rowsRead() };
    });
    expect(result.found).toHaveLength(1);
    // Ten scans of 100 (the last one finds the run), and one that finds the end.
    expect(result.pages.length).toBe(11);
    // The scan, the rows it names, and the count of the scan when the page is short: a few times the bound.
    for (const page of result.pages) expect(page.rows).toBeLessThanOrEqual(4 * 100 + 20);
    // The caller's own runs through its index: one run read, not the thousand.
    expect(result.own).toEqual(["sa:mine"]);
    expect(result.ownRows).toBeLessThanOrEqual(10);
  });

  it("a ledger made before the hour and day rollups derives them from its alarm, in slices, with the same figures", async () => {
    const now = Date.now();
    const stub = ledgerOf(env, `proj_derive_${Date.now()}`);
    const from = Math.floor((now - 10 * DAY) / HOUR) * HOUR;
    const q = { from, to: Math.ceil(now / HOUR) * HOUR + HOUR, step: HOUR, now };
    const records = Array.from({ length: 3_000 }, (_, i) => recordAt(from + i * 4 * MINUTE + 1, `app-${i % 7}`));
    const before = await runInDurableObject(stub, async (_instance, state) => {
      new Ledger(state.storage, Number.MAX_SAFE_INTEGER).add(records);
      const answer = new Ledger(state.storage, Number.MAX_SAFE_INTEGER).usage(q);
      // As a ledger of before: minute rollups of its apps only, the migrations before this one applied.
      for (const statement of [
        "DELETE FROM rollups_hour",
        "DELETE FROM rollups_day",
        "DELETE FROM rollups WHERE app_name = ''",
        "DELETE FROM meta WHERE key = 'rollups_derived_from'",
        // The migrations before the derivation's (the second) applied.
        "UPDATE meta SET value = 1 WHERE key = 'schema'",
      ])
        state.storage.sql.exec(statement);
      return answer;
    });
    // The object starts again, as after a deployment: its constructor migrates the ledger.
    const after = await runInDurableObject(stub, async (_instance, state) => {
      const ledger = new Ledger(state.storage, Number.MAX_SAFE_INTEGER);
      const during = ledger.usage(q);
      let slices = 0;
      while (ledger.purge(Date.now()).more) slices++;
      const hours = state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM rollups_hour").one().n;
      return { during, done: ledger.usage(q), slices, hours };
    });
    expect(after.during.totals).toEqual(before.totals);
    expect(after.done.totals).toEqual(before.totals);
    expect(after.done.series).toEqual(before.series);
    expect(after.hours).toBeGreaterThan(0);
    // 3,000 records written, derived and read twice: seconds on a machine shared with other suites.
  }, 30_000);
});

describe("attack: a purge too large for one call (33.5)", () => {
  it("a backlog larger than a slice shrinks across several alarms, each setting the next, until the daily one", async () => {
    const now = Date.now();
    const stub = ledgerOf(env, `proj_purge_${Date.now()}`);
    const old = now - RECORDS_RETENTION_MS - DAY;
    const backlog = Math.floor(2.5 * PURGE_SLICE);
    for (let i = 0; i < backlog; i += 5_000)
      await stub.add(Array.from({ length: 5_000 }, (_, j) => recordAt(old + i + j, "busy")));
    await stub.add([recordAt(now - HOUR, "busy")]);
    const left: number[] = [];
    const alarms: number[] = [];
    for (let round = 0; round < 5; round++) {
      expect(await runDurableObjectAlarm(stub)).toBe(true);
      left.push((await stub.stats()).records);
      alarms.push((await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm()))! - Date.now());
      if (left.at(-1) === 1) break;
    }
    // Each alarm a slice: 50,000 → 30,000 → 10,000 → gone (the fresh record stays).
    expect(left).toEqual([backlog + 1 - PURGE_SLICE, backlog + 1 - 2 * PURGE_SLICE, 1]);
    // While a slice leaves more, the next alarm comes within seconds; then a day later.
    expect(alarms.slice(0, 2).every((ms) => ms <= 5_000)).toBe(true);
    expect(alarms[2]).toBeGreaterThan(DAY - 60_000);
    expect((await stub.list({ limit: 10 })).rows).toHaveLength(1);
    void ROLLUPS_RETENTION_MS;
  }, 120_000);
});

describe("attack: rollups grow past the ledger's byte bound (40.5)", () => {
  it("past 1.6 times the bound, 2,000 runs over 200 new apps do not grow the ledger: no new app's row is written, the project's rows count every run", async () => {
    const now = Date.UTC(2026, 10, 21, 12);
    const grown = await runInDurableObject(ledgerOf(env, `proj_apps_${Date.now()}`), async (_instance, state) => {
      const sql = state.storage.sql;
      // A ledger with records and rollups of one app, then a bound it is past 1.6 times (full).
      new Ledger(state.storage, Number.MAX_SAFE_INTEGER).add(
        Array.from({ length: 2_000 }, (_, i) => recordAt(now - HOUR + i * 100, "app-first")),
      );
      const full = new Ledger(state.storage, Math.floor(sql.databaseSize / STOP_FACTOR) - 1);
      const appRows = () =>
        ["rollups", "rollups_hour", "rollups_day"]
          .map((table) => sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ${table} WHERE app_name != ''`).one().n)
          .reduce((a, b) => a + b, 0);
      const rowsBefore = appRows();
      const before = sql.databaseSize;
      // The attack: 200 apps (each made with builds:write, a default scope), 10 runs each, in the next minutes.
      for (let batch = 0; batch < 10; batch++)
        full.add(Array.from({ length: 200 }, (_, a) => recordAt(now + batch * MINUTE + a, `app-new-${a}`)));
      const project = full.usage({ from: now - DAY, to: now + DAY, step: DAY, now });
      const newApp = full.usage({ from: now - DAY, to: now + DAY, step: DAY, now, app_name: "app-new-7" });
      const known = full.usage({ from: now - DAY, to: now + DAY, step: DAY, now, app_name: "app-first" });
      // Runs of the app whose rows exist still count in them.
      full.add([recordAt(now - HOUR + 50, "app-first")]);
      const knownAfter = full.usage({ from: now - DAY, to: now + DAY, step: DAY, now, app_name: "app-first" });
      return {
        grew: sql.databaseSize - before,
        newAppRows: appRows() - rowsBefore,
        project,
        newApp,
        known,
        knownAfter,
      };
    });
    // Before the fix: 188,416 bytes, 2,400 rows (each of the 200 apps' minutes, hour and day).
    expect(grown.grew).toBeLessThanOrEqual(4 * 4_096);
    expect(grown.newAppRows).toBe(0);
    // The project's own figures count every run; one app's say they miss some.
    expect(grown.project.totals.runs).toBe(4_000);
    expect(grown.project.partial).toBe(false);
    expect(grown.newApp.totals.runs).toBe(0);
    expect(grown.newApp.partial).toBe(true);
    expect(grown.known.totals.runs).toBe(2_000);
    expect(grown.knownAfter.totals.runs).toBe(2_001);
  });
});
