import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type Client, client } from "../../../test/helpers";
import { appCalls, PEER, received, receiver, releaseStream, watchKey, watchState } from "../../../test/peers";
import { eventually, keeperOf, waitedRun } from "../../../test/keepers";
import { seedRunnable } from "../../../test/runs";
import { keptSql } from "../../../test/async-runs";
import { getConfig } from "../../platform/env";
import { keeperObject } from "./shard";
import { rowsInDeliveryStores } from "../../../test/delivery-stores";

// Exactly one app call per waited run, whatever happens to its keeper: an evicted or restarted object
// (`ctx.abort()` resets it as the platform would), a retried alarm, a second hand-off. The local runtime's
// own Durable Objects and alarms, not stand-ins.

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** Resets the keeper as an eviction or a restart would: its memory (the call in flight) is gone, its storage stays. */
async function evict(projectId: string, runId: string): Promise<void> {
  await runInDurableObject(keeperOf(projectId, runId), (_instance, state) => {
    state.abort("evicted by the test");
  }).catch(() => undefined);
}

interface KeptRunRow {
  status: string;
  mode: string;
  error_code: string | null;
  result: string;
  handed_over_at: number | null;
}
/** Run `runId`'s row of `app`, in its keeper (a waited run's row is kept there once it has one). */
const rowOf = async (app: { appPath: string }, runId: string) => {
  const run = { run_id: runId, status_url: `http://localhost${app.appPath}/runs/${runId}` };
  const query = "SELECT status, mode, error_code, result, handed_over_at FROM async_runs WHERE id = ?";
  const [row] = (await keptSql(run, query, runId)) as unknown as KeptRunRow[];
  return row ?? null;
};
/** D1's row of run `runId`: never one (a run's row is its keeper's). */
const d1RowOf = (runId: string) => env.DB.prepare("SELECT id FROM async_runs WHERE id = ?").bind(runId).first();

/** Runs the keeper's alarm now, as the runtime does when it is due (and again when retried). */
const alarmOf = (projectId: string, runId: string) => runDurableObjectAlarm(keeperOf(projectId, runId));

async function handedOverRun(api: Client, key: string, query = "") {
  const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
  const response = await api.call(`${app.runPath}${query}`, { token: app.token, headers: { Prefer: "wait=1" } });
  expect(response.status).toBe(202);
  const { run_id: runId } = (await response.json()) as { run_id: string };
  return { app, runId };
}

describe("a waited run's keeper reset mid-call", { timeout: 20_000 }, () => {
  it("after the hand-over: its alarm ends the run `interrupted`, delivers that, and never calls the app again", async () => {
    const api = client();
    const key = watchKey();
    const hook = await receiver();
    const { app, runId } = await handedOverRun(api, key, `?webhookEndpoint=${encodeURIComponent(hook.url)}`);
    expect(await rowOf(app, runId)).toMatchObject({ status: "running", mode: "wait" });
    expect(await d1RowOf(runId)).toBeNull();
    await evict(app.projectId, runId);
    // The alarm runs (the runtime retries the one the reset cut short; here it is run at once).
    await alarmOf(app.projectId, runId);
    const row = await eventually(async () => {
      const r = await rowOf(app, runId);
      return r?.status === "failed" ? r : null;
    }, "the run ends");
    expect(row.error_code).toBe("interrupted");
    expect(JSON.parse(row.result)).toMatchObject({ code: "run_interrupted", run_id: runId, status: 502 });
    const read = await api.json<{ status: string; error: { code: string } }>(`${app.appPath}/runs/${runId}`, {
      token: app.token,
    });
    expect(read.body).toMatchObject({ status: "failed", error: { code: "interrupted" } });
    const deliveries = await eventually(async () => {
      const got = await received(hook.key);
      return got.length > 0 ? got : null;
    }, "the interrupted result is delivered");
    expect(JSON.parse(deliveries[0]!.body!)).toMatchObject({ code: "run_interrupted" });

    // A retried alarm, and the app answering after all: nothing more happens.
    await alarmOf(app.projectId, runId);
    await releaseStream(key);
    expect(await appCalls(runId)).toBe(1);
    expect((await rowOf(app, runId))!.status).toBe("failed");
    expect(await received(hook.key)).toHaveLength(1);
    await runInDurableObject(keeperOf(app.projectId, runId), async (_instance, state) => {
      expect(state.storage.sql.exec("SELECT run_id FROM kept_runs").toArray()).toEqual([]);
    });
  });

  it("after the run's end was stored but before its delivery reached its lane: the alarm sends that delivery, once", async () => {
    const api = client();
    const key = watchKey();
    const hook = await receiver();
    const { app, runId } = await handedOverRun(api, key, `?webhookEndpoint=${encodeURIComponent(hook.url)}`);
    // The object stops right after storing the run's end (as its own call would): the row says succeeded,
    // the delivery recorded before the call is still pending, never attempted, and no lane has it.
    await evict(app.projectId, runId);
    const run = { run_id: runId, status_url: `http://localhost${app.appPath}/runs/${runId}` };
    await keptSql(
      run,
      `UPDATE async_runs SET status = 'succeeded', result_status = 200, result_type = 'application/json',
        result_bytes = 16, result = '{"stored":"end"}', finished_at = ? WHERE id = ?`,
      api.clock.now().getTime(),
      runId,
    );
    const pending = await rowsInDeliveryStores<{ id: string; status: string; attempt_count: number }>(
      "SELECT id, status, attempt_count FROM webhook_deliveries WHERE run_id = ?",
      [runId],
      runId,
    );
    expect(pending).toEqual([{ id: expect.stringMatching(/^whd_/), status: "pending", attempt_count: 0 }]);
    await alarmOf(app.projectId, runId);
    const deliveries = await eventually(async () => {
      const got = await received(hook.key);
      return got.length > 0 ? got : null;
    }, "the stored end is delivered");
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]!.body).toBe('{"stored":"end"}');
    // The recorded delivery itself, delivered: no second record.
    const settled = await eventually(async () => {
      const results = await rowsInDeliveryStores<{ id: string; status: string }>(
        "SELECT id, status FROM webhook_deliveries WHERE run_id = ?",
        [runId],
        runId,
      );
      return results[0]?.status === "delivered" ? results : null;
    }, "the delivery is settled");
    expect(settled).toEqual([{ id: pending[0]!.id, status: "delivered" }]);
    // The run stays as it ended; a retried alarm sends nothing more.
    expect(await rowOf(app, runId)).toMatchObject({ status: "succeeded" });
    await alarmOf(app.projectId, runId);
    await releaseStream(key);
    expect(await received(hook.key)).toHaveLength(1);
    expect(await appCalls(runId)).toBe(1);
  });

  it("while its caller still waits: the caller gets 502 run_interrupted, and the run gets its row, ended, from the alarm", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const answering = api.call(app.runPath, { token: app.token, headers: { Prefer: "wait=60" } });
    const runId = await eventually(async () => (await watchState(key)).runId, "the app is called");
    await evict(app.projectId, runId);
    const response = await answering;
    expect(response.status).toBe(502);
    expect(await response.json()).toMatchObject({ code: "run_interrupted", run_id: runId });
    expect(response.headers.get("x-run-id")).toBe(runId);
    // The caller never had a status URL, but the run the app saw has a state.
    expect(await rowOf(app, runId)).toBeNull();
    await alarmOf(app.projectId, runId);
    expect(await d1RowOf(runId)).toBeNull();
    expect(await rowOf(app, runId)).toMatchObject({
      status: "failed",
      mode: "wait",
      error_code: "interrupted",
      handed_over_at: null,
    });
    await releaseStream(key);
    expect(await appCalls(runId)).toBe(1);
  });
});

describe("a keeper's alarm", { timeout: 20_000 }, () => {
  it("holds a run its object is still calling: the alarm waits for the call, the run ends as it would", async () => {
    const api = client();
    const key = watchKey();
    const { app, runId } = await handedOverRun(api, key);
    // The alarm, run while the call is in flight, holds it (it returns once the run is over).
    const holding = alarmOf(app.projectId, runId);
    await releaseStream(key);
    await holding;
    const read = await api.json<{ status: string }>(`${app.appPath}/runs/${runId}`, { token: app.token });
    expect(read.body.status).toBe("succeeded");
    expect(await appCalls(runId)).toBe(1);
  });
});

describe("a keeper takes one run, once", { timeout: 20_000 }, () => {
  it("refuses a second hand-off of a run it has, without calling the app", async () => {
    const api = client();
    const key = watchKey();
    const { app, runId } = await handedOverRun(api, key);
    const kept = waitedRun("proj_x", runId, {
      caller: "admin",
      requestId: "req_x",
      runtime: "cortex",
      limits: { headersMs: 1000, idleMs: 1000 },
      seconds: 1,
    });
    const second = await keeperOf(app.projectId, runId)
      .take(new Request(`${PEER}/upstream/echo?again=1`), kept, 0)
      .then(
        () => "answered",
        (error: unknown) => String(error),
      );
    expect(second).toMatch(/has run .* already/);
    await releaseStream(key);
    expect(await appCalls(runId)).toBe(1);
  });
});

describe("a keeper's capacity", { timeout: 30_000 }, () => {
  const KEEPER_RUNS_MAX = getConfig(env).keeperRunsMax;

  it("is the setting KEEPER_RUNS_MAX: 32 unless set, 1 to 64, anything else fails the configuration check naming it", () => {
    expect(getConfig({ ...env, KEEPER_RUNS_MAX: undefined }).keeperRunsMax).toBe(32);
    expect(getConfig({ ...env, KEEPER_RUNS_MAX: "8" }).keeperRunsMax).toBe(8);
    for (const bad of ["0", "65", "2.5", "many"])
      expect(() => getConfig({ ...env, KEEPER_RUNS_MAX: bad })).toThrow(/KEEPER_RUNS_MAX/);
  });
  it("refuses a run past KEEPER_RUNS_MAX at once, calling nothing, and takes runs again once some ended", async () => {
    const key = watchKey();
    const keeper = keeperObject(env, `proj_capacity:${key}`);
    // Callers of their own: a caller holds at most half of a keeper (the keeper's security tests).
    const kept = (runId: string, caller = `sa:${runId}`) =>
      waitedRun("proj_capacity", runId, { caller, requestId: "req_capacity" });
    const held = (i: number) =>
      new Request(`${PEER}/upstream/echo?hold=${key}`, { headers: { "X-Run-Id": `run_capacity_${key}_${i}` } });
    const taken = Array.from({ length: KEEPER_RUNS_MAX }, (_, i) =>
      keeper.take(held(i), kept(`run_capacity_${key}_${i}`), 0),
    );
    await eventually(
      async () => (await appCalls(`run_capacity_${key}_${KEEPER_RUNS_MAX - 1}`)) === 1,
      "every run called",
    );
    const refused = await keeper.take(held(KEEPER_RUNS_MAX), kept(`run_capacity_${key}_${KEEPER_RUNS_MAX}`), 0);
    expect(refused).toEqual({ kind: "busy", reason: "runs" });
    expect(await appCalls(`run_capacity_${key}_${KEEPER_RUNS_MAX}`)).toBe(0);
    await releaseStream(key);
    const answers = await Promise.all(taken);
    expect(answers.every((a) => a.kind === "answered")).toBe(true);
    for (const a of answers) if (a.kind === "answered") await a.response.arrayBuffer();
    const again = await keeper.take(
      new Request(`${PEER}/upstream/echo`, { headers: { "X-Run-Id": `run_capacity_${key}_again` } }),
      kept(`run_capacity_${key}_again`),
      0,
    );
    expect(again.kind).toBe("answered");
    if (again.kind === "answered") await again.response.arrayBuffer();
  });
});
