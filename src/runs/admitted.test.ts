import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { consume, keptRun, keptSql, poll, startAsync } from "../../test/async-runs";
import { client } from "../../test/helpers";
import { eventually, keeperOf, waitedRun } from "../../test/keepers";
import { seedRunnable } from "../../test/runs";
import { appCalls, PEER, received, receiver } from "../../test/peers";
import { forgetDeployment } from "../apps/deployments";
import { admittedRunOf } from "./admitted";
import { keptRunOf } from "./wait/message";
import { createDb } from "../db/client";
import { insertRun } from "./async/store";
import { forgetLegacyRuns } from "./async/rows";

// One admitted run (admitted.ts), made by admission and carried as it is: what the async store keeps
// and its consumer executes, what a keeper takes; and the runs stored before it, still read.

const api = client();

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A waited run in the shape of the code before the admitted run (`KeptRunV1`): a `custom` app's `GET run`, waiting 30 s. */
const keptRunV1 = (
  app: { projectId: string; appName: string },
  runId: string,
  parts: Record<string, unknown> = {},
) => ({
  v: 1,
  runId,
  projectId: app.projectId,
  appName: app.appName,
  path: "run",
  method: "GET",
  caller: "sa:old",
  requestId: "req_old",
  runtime: "custom",
  acceptHeader: null as string | null,
  limits: { headersMs: 30_000, idleMs: 30_000 },
  acceptedAt: Date.now(),
  sentAfterMs: 0,
  wait: 30,
  cancelAfterMs: null,
  webhook: null as { endpoint: string; secret: string } | null,
  bytesIn: 0,
  key: null,
  ...parts,
});

/** The admitted run `run`'s row keeps, in its keeper. */
const storedAdmitted = async (run: { run_id: string; status_url: string }) => {
  const [row] = (await keptSql(run, "SELECT admitted FROM async_runs WHERE id = ?", run.run_id)) as {
    admitted: string | null;
  }[];
  return row?.admitted ?? null;
};

/** D1's row of run `runId`, if any: a run is never written there any more (its keeper keeps it). */
const d1Row = (runId: string) => env.DB.prepare("SELECT id FROM async_runs WHERE id = ?").bind(runId).first();

/** The app `appId` as a redeploy from another runtime leaves it: `custom` now, known at once to this isolate. */
async function redeployAsCustom(appId: string) {
  await env.DB.prepare("UPDATE apps SET runtime = 'custom' WHERE id = ?").bind(appId).run();
  forgetDeployment(appId);
}

describe("the admitted run", { timeout: 20_000 }, () => {
  it("is one value per mode: its mode a union, checked on the way in (a stored or received run)", () => {
    const run = waitedRun("proj_a", "run_a", { seconds: 5, key: { value: "k", requestHash: "h" } });
    expect(admittedRunOf(JSON.parse(JSON.stringify(run)))).toEqual(run);
    expect(admittedRunOf({ ...run, mode: { kind: "wait" } })).toBeNull();
    expect(admittedRunOf({ ...run, mode: { kind: "sometimes" } })).toBeNull();
    expect(admittedRunOf({ ...run, webhook: { endpoint: "https://h.example/", secret: "in clear" } })).toBeNull();
    expect(admittedRunOf({ ...run, mode: { kind: "async", key: null } })?.mode).toEqual({ kind: "async", key: null });
  });

  it("is what an async run's row keeps (but its secret, sealed in its own column), and forgotten once the run ends", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app, {
      query: `webhookEndpoint=${encodeURIComponent("https://hooks.example/in")}`,
      headers: { "X-Webhook-Secret": "s3cret", "Cancel-After": "60" },
    });
    const runId = started.body.run_id;
    const admitted = admittedRunOf(JSON.parse((await storedAdmitted(started.body))!));
    expect(admitted).toMatchObject({
      runId,
      projectId: app.projectId,
      appName: app.appName,
      appPath: "run",
      method: "POST",
      runtime: "cortex",
      acceptHeader: "application/json",
      cancelAfterMs: 60_000,
      webhook: { endpoint: "https://hooks.example/in", secret: null },
      mode: { kind: "async", key: null },
    });
    const [row] = (await keptSql(started.body, "SELECT webhook_secret FROM async_runs WHERE id = ?", runId)) as {
      webhook_secret: string;
    }[];
    expect(JSON.parse(row!.webhook_secret)).toEqual({ iv: expect.any(String), ct: expect.any(String) });
    expect(row!.webhook_secret).not.toContain("s3cret");
    expect(await d1Row(runId)).toBeNull();
    await consume(api, started.message);
    expect((await keptRun(started.body))?.status).toBe("succeeded");
    expect(await storedAdmitted(started.body)).toBeNull();
  });

  it("is executed by the async consumer as it was admitted: an app redeployed from cortex to custom after the 202 still answers in the envelope", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    await redeployAsCustom(app.appId);
    await consume(api, started.message);
    const done = await poll(api, started.body.status_url, app.token);
    expect(done.body.status).toBe("succeeded");
    expect(Object.keys(done.body.result as object)).toEqual(["run_id", "result", "run_time_ms", "timestamp"]);
  });

  it("an async run stored before the admitted run (no `admitted`) still runs, with the app as deployed now", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const cleared = await keptSql(
      started.body,
      "UPDATE async_runs SET admitted = NULL WHERE id = ? RETURNING id",
      started.body.run_id,
    );
    expect(cleared).toHaveLength(1);
    await redeployAsCustom(app.appId);
    await consume(api, started.message);
    const done = await poll(api, started.body.status_url, app.token);
    expect(done.body.status).toBe("succeeded");
    // Answered as a custom app's run is (the app's own answer), not in a cortex app's envelope.
    expect(Object.keys(done.body.result as object)).not.toEqual(["run_id", "result", "run_time_ms", "timestamp"]);
  });

  it("an async run stored in D1 before runs moved to their keepers (and before the admitted run) still runs from D1", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const runId = started.body.run_id;
    // The row as the code before kept it: in D1, without `admitted`; its keeper has none.
    const kept = await keptRun(started.body);
    expect(kept?.status).toBe("queued");
    expect(await insertRun(createDb(env.DB), { ...kept!, admitted: null })).toBe(true);
    await keptSql(started.body, "DELETE FROM async_runs WHERE id = ?", runId);
    forgetLegacyRuns();
    try {
      await redeployAsCustom(app.appId);
      await consume(api, started.message);
      const done = await poll(api, started.body.status_url, app.token);
      expect(done.body.status).toBe("succeeded");
      expect(Object.keys(done.body.result as object)).not.toEqual(["run_id", "result", "run_time_ms", "timestamp"]);
      // Ended where it was kept: D1's row, the keeper still without one.
      const row = await env.DB.prepare("SELECT status FROM async_runs WHERE id = ?")
        .bind(runId)
        .first<{ status: string }>();
      expect(row?.status).toBe("succeeded");
      expect(await keptRun(started.body)).toBeUndefined();
      expect(await appCalls(runId)).toBe(1);
    } finally {
      await env.DB.prepare("DELETE FROM async_runs WHERE id = ?").bind(runId).run();
      forgetLegacyRuns();
    }
  });

  it("a keeper's record of a run in flight from before the admitted run is still read, and its run ended `interrupted`", async () => {
    const app = await seedRunnable(api);
    const runId = `run_${crypto.randomUUID().replaceAll("-", "").slice(0, 26)}`;
    const old = keptRunV1(app, runId, {
      method: "POST",
      caller: "admin",
      runtime: "cortex",
      acceptHeader: "application/json",
      acceptedAt: Date.now() - 5_000,
      sentAfterMs: 3,
      wait: 10,
      bytesIn: 2,
    });
    expect(keptRunOf(old)).toMatchObject({ runId, appPath: "run", mode: { kind: "wait", seconds: 10, key: null } });
    const record = {
      phase: "called",
      run: old,
      target: "https://app.example/run",
      delivery: null,
      calledAt: Date.now() - 4_000,
      handedOverAt: null,
    };
    const keeper = keeperOf(app.projectId, runId);
    await runInDurableObject(keeper, (_instance, state) => {
      state.storage.sql.exec("INSERT INTO kept_runs (run_id, record) VALUES (?, ?)", runId, JSON.stringify(record));
      // As the keeper that stored it had: its alarm set, to hold the run (or end it once lost).
      void state.storage.setAlarm(Date.now());
    });
    await runDurableObjectAlarm(keeper);
    const row = await eventually(
      () =>
        runInDurableObject(
          keeper,
          (_instance, state) =>
            state.storage.sql
              .exec<{ status: string; mode: string; error_code: string }>(
                "SELECT status, mode, error_code FROM async_runs WHERE id = ?",
                runId,
              )
              .toArray()[0],
        ),
      "the run's row, ended",
    );
    expect(row).toEqual({ status: "failed", mode: "wait", error_code: "interrupted" });
    expect(await d1Row(runId)).toBeNull();
    await runInDurableObject(keeper, (_instance, state) => {
      expect(state.storage.sql.exec("SELECT run_id FROM kept_runs").toArray()).toEqual([]);
    });
  });

  it("a keeper still takes a run from a Worker of the code before (its RPC `run`, the old shape, the secret in clear), and signs its delivery with that secret", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }], "old-worker-secret");
    const runId = `run_${crypto.randomUUID().replaceAll("-", "").slice(0, 26)}`;
    const kept = keptRunV1(app, runId, {
      caller: "sa:old",
      requestId: "req_old_worker",
      webhook: { endpoint: hook.url, secret: "old-worker-secret" },
    });
    const keeper = keeperOf(app.projectId, runId);
    const request = new Request(`${PEER}/upstream/echo`, { headers: { "X-Run-Id": runId } });
    const answer = await keeper.run(request, kept);
    expect(answer.kind).toBe("answered");
    if (answer.kind === "answered") await answer.response.arrayBuffer();
    expect(await appCalls(runId)).toBe(1);
    const [delivery] = await eventually(async () => {
      const got = await received(hook.key);
      return got.length > 0 ? got : null;
    }, "the run's delivery");
    expect(delivery!.signatures).toEqual({ node: true, openssl: true, standard: true });
  });
});
