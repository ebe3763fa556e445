import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { consume, keptRun, runAddress, startAsync } from "../async-runs";
import { heldSleeps } from "../event-streams";
import { type Client, client } from "../helpers";
import { appCalls, PEER, releaseStream, watchKey, watchState } from "../peers";
import { seedRunnable } from "../runs";

// A run's record in usage, end to end, for the runs that outlive their caller: a waited run is ONE
// record whose mode says it waited and whose `handed_over` says whether its caller stopped waiting,
// made by whoever owned the run (the Worker, or the keeper after a hand-over); a run ended by its
// `Cancel-After` is a `deadline`, which usage counts as a timeout, in every mode.

interface RunRecord {
  run_id: string;
  mode: string;
  status_code: number;
  ending: string;
  failure: { by: string; code?: string; status?: number } | null;
  timed_out: boolean;
  handed_over: boolean;
  created_at: string;
  times: {
    called_ms: number | null;
    answered_ms: number | null;
    first_byte_ms: number | null;
    handed_over_ms: number | null;
    ended_ms: number;
  };
}

type App = Awaited<ReturnType<typeof seedRunnable>>;

beforeEach(() => {
  // Runs that end on a deadline log an error line by design.
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** The run's record once its owner has handed it to usage (a keeper does so after the caller's answer). */
async function recordOf(api: Client, app: App, runId: string): Promise<RunRecord> {
  let record: RunRecord | undefined;
  await vi.waitFor(
    async () => {
      const read = await api.json<RunRecord>(`/v2/projects/${app.projectId}/runs/${runId}`);
      expect(read.status).toBe(200);
      record = read.body;
    },
    { timeout: 15_000, interval: 50 },
  );
  return record!;
}

/** How many records of the project's runs list carry `runId` (over every run the tests' clocks can date). */
async function recordsWith(api: Client, app: App, runId: string): Promise<number> {
  const to = new Date(Date.now() + 3600_000).toISOString();
  const list = await api.json<{ data: { run_id: string }[] }>(
    `/v2/projects/${app.projectId}/runs?limit=100&from=2026-01-01T00:00:00.000Z&to=${to}`,
  );
  expect(list.status).toBe(200);
  return list.body.data.filter((item) => item.run_id === runId).length;
}

/** The moments of a record, in order where the run had them: called, then answered and handed over (either first), then ended. */
function expectInOrder(times: RunRecord["times"]) {
  const { called_ms: called, answered_ms: answered, handed_over_ms: handedOver, ended_ms: ended } = times;
  expect(called).not.toBeNull();
  expect(called!).toBeGreaterThanOrEqual(0);
  for (const later of [answered, handedOver]) {
    if (later === null) continue;
    expect(later).toBeGreaterThanOrEqual(called!);
    expect(later).toBeLessThanOrEqual(ended);
  }
}

describe("a waited run in usage: one record, its mode says it waited, and whether it was handed over", () => {
  it("answered within the wait: one record, mode wait, not handed over", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const response = await api.call(app.runPath, {
      method: "POST",
      token: app.token,
      body: { inputs: { x: 1 } },
      headers: { Prefer: "wait=5" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("preference-applied")).toBe("wait=5");
    await response.text();
    const runId = response.headers.get("x-run-id")!;
    const record = await recordOf(api, app, runId);
    expect(record).toMatchObject({
      run_id: runId,
      mode: "wait",
      handed_over: false,
      ending: "answered",
      status_code: 200,
      failure: null,
      timed_out: false,
    });
    expect(record.times.handed_over_ms).toBeNull();
    expect(record.times.called_ms).not.toBeNull();
    expectInOrder(record.times);
    expect(await recordsWith(api, app, runId)).toBe(1);
  });

  it("handed over at the end of the wait: no record while it runs, then one, handed over, its moments in order", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}`);
    const response = await api.call(app.runPath, { token: app.token, headers: { Prefer: "wait=1" } });
    expect(response.status).toBe(202);
    const { run_id: runId } = (await response.json()) as { run_id: string };
    // Under way: its record is made when it has ended.
    expect((await api.call(`/v2/projects/${app.projectId}/runs/${runId}`)).status).toBe(404);
    await releaseStream(key);
    const record = await recordOf(api, app, runId);
    expect(record).toMatchObject({
      run_id: runId,
      mode: "wait",
      handed_over: true,
      ending: "answered",
      status_code: 200,
      failure: null,
    });
    expect(record.times.handed_over_ms).toBeGreaterThanOrEqual(900);
    expectInOrder(record.times);
    expect(await recordsWith(api, app, runId)).toBe(1);
    expect(await appCalls(runId)).toBe(1);
    // The run's own timeline, at its status URL, says the same.
    const status = await api.json<{ status: string; mode: string; handed_over_at: string | null }>(
      `${app.appPath}/runs/${runId}`,
      { token: app.token },
    );
    expect(status.body).toMatchObject({ status: "succeeded", mode: "wait" });
    expect(status.body.handed_over_at).not.toBeNull();
  }, 20_000);

  it("handed over by a caller who hung up while waiting: one record, handed over, the app's answer counted", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const hangUp = new AbortController();
    const request = new Request(`http://localhost${app.runPath}`, {
      headers: { Authorization: `Bearer ${app.token}`, Prefer: "wait=60" },
      signal: hangUp.signal,
    });
    void api.worker.fetch(request, env, createExecutionContext()).catch(() => null);
    let runId = "";
    await vi.waitFor(
      async () => {
        runId = (await watchState(key)).runId ?? "";
        expect(runId).not.toBe("");
      },
      { timeout: 10_000, interval: 25 },
    );
    hangUp.abort();
    await vi.waitFor(async () => expect((await keptRun(runAddress(app.projectId, runId)))?.mode).toBe("wait"), {
      timeout: 10_000,
      interval: 25,
    });
    await releaseStream(key);
    const record = await recordOf(api, app, runId);
    expect(record).toMatchObject({ mode: "wait", handed_over: true, ending: "answered", status_code: 200 });
    expect(await recordsWith(api, app, runId)).toBe(1);
  }, 20_000);
});

describe("a deadline counts as a timeout in usage, in every mode", () => {
  it("ends a synchronous, a handed-over waited and an async run past Cancel-After as `deadline`, each one record, and usage counts three timeouts", async () => {
    // The Worker's and the consumer's deadlines wait on the tests' sleeps; the keeper's on the
    // platform's clock (5 s, the shortest deadline).
    const sleeps = heldSleeps();
    const api = client({ sleep: sleeps.sleep });
    const key = watchKey();
    // An app that never answers: only the deadlines end its calls.
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const deadline = { "Cancel-After": "5s" };

    /** The app has been called with run `runId` (or, without one, with some run): its id. */
    const called = async (runId?: string) => {
      let seen = "";
      await vi.waitFor(
        async () => {
          seen = (await watchState(key)).runId ?? "";
          expect(seen).not.toBe("");
          if (runId !== undefined) expect(seen).toBe(runId);
        },
        { timeout: 10_000, interval: 25 },
      );
      return seen;
    };

    // Synchronous: the deadline passes once the app is called.
    const sync = api.call(app.runPath, { token: app.token, headers: deadline });
    const syncId = await called();
    await sleeps.waiting();
    sleeps.pass();
    const syncAnswer = await sync;
    expect(syncAnswer.status).toBe(504);
    expect(await syncAnswer.json()).toMatchObject({ code: "run_deadline" });

    // Async: the consumer's call, ended at the deadline.
    const started = await startAsync(api, app, { headers: deadline });
    const consuming = consume(api, started.message, { deps: { sleep: sleeps.sleep } });
    await called(started.body.run_id);
    await sleeps.waiting();
    sleeps.pass();
    await consuming;

    // Waited and handed over after 1 s; its keeper ends it at 5 s.
    const accepted = await client().call(app.runPath, { token: app.token, headers: { Prefer: "wait=1", ...deadline } });
    expect(accepted.status).toBe(202);
    const { run_id: waitedId } = (await accepted.json()) as { run_id: string };

    expect(syncAnswer.headers.get("x-run-id")).toBe(syncId);
    const ids = { sync: syncId, wait: waitedId, async: started.body.run_id };
    for (const [mode, runId] of Object.entries(ids)) {
      const record = await recordOf(api, app, runId);
      expect(record, mode).toMatchObject({
        mode,
        ending: "deadline",
        timed_out: true,
        failure: { by: "gateway", code: "run_deadline" },
        status_code: 504,
        handed_over: mode === "wait",
      });
      expect(await recordsWith(api, app, runId), mode).toBe(1);
      expect(await appCalls(runId), mode).toBe(1);
    }
    const to = new Date(Date.now() + 3600_000).toISOString();
    const usage = await api.json<{ totals: { runs: number; timeouts: number } }>(
      `/v2/projects/${app.projectId}/usage?interval=day&from=2026-11-01T00:00:00.000Z&to=${to}`,
    );
    expect(usage.status).toBe(200);
    expect(usage.body.totals).toMatchObject({ runs: 3, timeouts: 3 });
  }, 30_000);
});
