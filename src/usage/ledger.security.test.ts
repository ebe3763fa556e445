import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { consume, startAsync } from "../../test/async-runs";
import { callWith, seedRunnable } from "../../test/runs";
import { FIELD_MAX, Ledger, STOP_FACTOR } from "./ledger";
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
      expect(perRecord).toBeLessThan(1_100);
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
    const short = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent) return controller.error(new Error("connection lost"));
        sent = true;
        controller.enqueue(new TextEncoder().encode("0123456789"));
      },
    });
    let sent = false;
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
