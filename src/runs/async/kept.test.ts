import {
  createExecutionContext,
  createScheduledController,
  runDurableObjectAlarm,
  runInDurableObject,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  consume,
  keeperOf,
  interceptedKeepers,
  keeperUnavailable,
  keptRun,
  keptSql,
  poll,
  runAddress,
  startAsync,
  sweepKept,
} from "../../../test/async-runs";
import { drive } from "../../../test/webhooks";
import { ADMIN, client, testDeps } from "../../../test/helpers";
import { PEER, received, receiver } from "../../../test/peers";
import { seedRunnable } from "../../../test/runs";
import { createDb } from "../../db/client";
import { newId } from "../../platform/ids";
import { CRONS } from "../../platform/triggers";
import type { RunKeeper } from "../../index";
import { createWorker } from "../../worker";
import { IDEMPOTENCY_WINDOW_MS } from "../idempotency";
import { KEEPER_SHARDS, keeperObject, keeperOfShard } from "../wait/shard";
import { dueOfRun } from "./kept-runs";
import { forgetLegacyRuns, legacyRuns } from "./rows";
import { insertRun, type NewAsyncRun, runById } from "./store";
import { RESULT_DELIVERY_MAX_MS, RUN_RETENTION_MS, RUN_SLICE_MAX, RUNNING_MAX_MS } from "./sweep";
import { changeInDeliveryStores, rowsInDeliveryStores } from "../../../test/delivery-stores";

/**
 * Async runs kept by their keeper (issue 41): nothing of a run in D1, each keeper's storage bounded, its
 * retention enforced by its own alarm, a project's list merged from its keepers, and the runs D1 held
 * before the move still served until their retention has taken them.
 */

const db = createDb(env.DB);

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
  forgetLegacyRuns();
});

/** A queued run's row of `app`, made at `at` (ms), as an insert writes it; `over` on top. */
const queuedRow = (
  app: { projectId: string; appName: string },
  at: number,
  over: Omit<Partial<NewAsyncRun>, "id"> = {},
): NewAsyncRun & { id: string } => ({
  id: newId("run", at),
  projectId: app.projectId,
  appName: app.appName,
  status: "queued",
  method: "POST",
  appUrl: "https://app.example/run",
  requestHeaders: "[]",
  requestId: newId("req"),
  requestHash: "h",
  caller: "admin",
  createdAt: new Date(at),
  ...over,
});

/** A run's ending at `at` (ms), its result `result`. */
const endingAt = (
  at: number,
  { status = "succeeded", result = "{}" }: { status?: "succeeded" | "failed"; result?: string } = {},
) => ({
  status,
  resultStatus: 200,
  resultType: "application/json",
  resultBytes: result.length,
  result,
  resultInR2: false,
  errorCode: null,
  errorMessage: null,
  finishedAt: new Date(at),
});

const d1Runs = async (projectId: string) =>
  (await env.DB.prepare("SELECT count(*) AS n FROM async_runs WHERE project_id = ?")
    .bind(projectId)
    .first<{ n: number }>())!.n;

describe("an async run's row lives in its keeper", () => {
  it("from its 202 to its end, nothing of it is written to D1", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app, { headers: { "Idempotency-Key": "kept-1" } });
    expect(started.response.status).toBe(202);
    expect(await keptRun(started.body)).toMatchObject({ status: "queued", idempotencyKey: "kept-1" });
    await consume(api, started.message);
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("succeeded");
    expect(await d1Runs(app.projectId)).toBe(0);
  });

  it("a keeper past its storage bound takes no new run: the caller's 503 with Retry-After, nothing queued", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const first = await startAsync(api, app, { headers: { "Idempotency-Key": "full-1" } });
    for (let shard = 0; shard < KEEPER_SHARDS; shard++)
      await runInDurableObject(keeperObject(env, keeperOfShard(app.projectId, shard)), (instance: RunKeeper) => {
        instance.keeper.runs.bytesMax = 1;
      });
    const refused = await startAsync(api, app, { headers: { "Idempotency-Key": "full-2" } });
    expect(refused.response.status).toBe(503);
    expect(refused.response.headers.get("retry-after")).toBe("60");
    expect(refused.body).toMatchObject({ code: "service_unavailable", status: 503 });
    expect(refused.sent).toEqual([]);
    // A replay of a run it has is still answered: it writes nothing.
    const replay = await startAsync(api, app, { headers: { "Idempotency-Key": "full-1" } });
    expect(replay.response.status).toBe(202);
    expect(replay.body.run_id).toBe(first.body.run_id);
    // The bound refuses new work, never the record of work done: a run that has ended is written.
    await runInDurableObject(keeperOf(first.body), (instance: RunKeeper) => {
      const row = { ...(instance.keeper.runs.byId(first.body.run_id) as NewAsyncRun), id: newId("run") };
      expect(
        instance.keeper.runs.insert({ ...row, idempotencyKey: null, status: "failed", finishedAt: new Date() }),
      ).toBe("taken");
      expect(instance.keeper.runs.insert({ ...row, id: newId("run"), idempotencyKey: null })).toBe("full");
    });
  });

  it("a keeper that wrote a run and lost its answer: the run is withdrawn, the caller told to retry, nothing left queued", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const inserted: string[] = [];
    const lostAnswers = interceptedKeepers(async (op, args, call) => {
      const answer = await call();
      if (op !== "insert") return answer;
      inserted.push((args[0] as { id: string }).id);
      throw keeperUnavailable();
    });
    const started = await startAsync(api, app, { bindings: { RUN_KEEPER: lostAnswers as unknown as string } });
    expect(started.response.status).toBe(503);
    expect(started.sent).toEqual([]);
    expect(inserted).toHaveLength(1);
    expect(await keptRun(runAddress(app.projectId, inserted[0]!))).toBeUndefined();
  });

  it("a consumer whose end was written but its answer lost: the run ends once, its delivery goes out once", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const hook = await receiver();
    const started = await startAsync(api, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    let lost = 0;
    const lostEnd = interceptedKeepers(async (op, _args, call) => {
      const answer = await call();
      // The first end's answer is lost on its way back; the write was made.
      if (op === "end" && lost++ === 0) throw keeperUnavailable();
      return answer;
    });
    const consumed = await consume(api, started.message, { bindings: { RUN_KEEPER: lostEnd } });
    expect(consumed).toMatchObject({ acked: true });
    expect(consumed.deliveries).toHaveLength(1);
    await drive(api, consumed.deliveries[0]);
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("succeeded");
    const results = await rowsInDeliveryStores(
      "SELECT id, status FROM webhook_deliveries WHERE run_id = ?",
      [started.body.run_id],
      started.body.run_id,
    );
    expect(results).toEqual([{ id: (consumed.deliveries[0] as { id: string }).id, status: "delivered" }]);
    expect(await received(hook.key)).toHaveLength(1);
  });

  it("a finished run whose result is gone from R2 is noted without a delivery, so no sweep meets it again", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const hook = await receiver();
    const started = await startAsync(api, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    await consume(api, started.message);
    await keptSql(
      started.body,
      "UPDATE async_runs SET delivery_id = NULL, result = NULL, result_in_r2 = 1 WHERE id = ?",
      started.body.run_id,
    );
    // Its delivery was never recorded either (the keeper stopped after the end): only the result could make one.
    await changeInDeliveryStores(
      "DELETE FROM webhook_deliveries WHERE run_id = ?",
      [started.body.run_id],
      started.body.run_id,
    );
    api.clock.advance(RESULT_DELIVERY_MAX_MS + 60_000);
    await sweepKept(started.body, api.clock.now);
    expect(await keptRun(started.body)).toMatchObject({ deliveryId: "none" });
  });
});

describe("a project's runs, listed from its keepers", () => {
  it("merges every shard newest first, pages through all of them once, and filters by state", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const started = await startAsync(api, app);
      ids.push(started.body.run_id);
      if (i % 3 === 0) await consume(api, started.message);
      api.clock.advance(1_000);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor ? `?limit=5&cursor=${cursor}` : "?limit=5";
      const page = await api.json<{ data: { run_id: string }[]; next_cursor: string | null }>(
        `/v2/projects/${app.projectId}/async-runs${query}`,
        { token: ADMIN },
      );
      expect(page.status).toBe(200);
      seen.push(...page.body.data.map((run) => run.run_id));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
    const succeeded = await api.json<{ data: { run_id: string; status: string }[] }>(
      `/v2/projects/${app.projectId}/async-runs?status=succeeded`,
      { token: ADMIN },
    );
    expect(succeeded.body.data.map((run) => run.run_id)).toEqual([ids[9], ids[6], ids[3], ids[0]]);
  });
});

describe("a keeper's alarm sweeps its runs", () => {
  it("is set for its runs' next due work, and its sweep purges what is past retention", async () => {
    // The platform's clock throughout: the alarm keeps it.
    const api = client();
    api.clock.set(new Date().toISOString());
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const keeper = keeperOf(started.body);
    await runInDurableObject(keeper, (instance: RunKeeper) => {
      instance.keeper.sweepsByAlarm = true;
    });
    await consume(api, started.message);
    const [row] = (await keptSql(
      started.body,
      "SELECT started_at FROM async_runs WHERE id = ?",
      started.body.run_id,
    )) as {
      started_at: number;
    }[];
    // Claimed: due when a consumer's lifetime has passed (its end comes sooner, and leaves only its retention).
    const alarm = await runInDurableObject(keeper, (_instance, state) => state.storage.getAlarm());
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(row!.started_at + RUNNING_MAX_MS);
    expect(alarm!).toBeGreaterThan(Date.now());
    // That alarm finds nothing due yet, and sets itself again: for the run's retention.
    expect(await runDurableObjectAlarm(keeper)).toBe(true);
    const [finished] = (await keptSql(
      started.body,
      "SELECT finished_at FROM async_runs WHERE id = ?",
      started.body.run_id,
    )) as {
      finished_at: number;
    }[];
    expect(await runInDurableObject(keeper, (_instance, state) => state.storage.getAlarm())).toBe(
      finished!.finished_at + RUN_RETENTION_MS,
    );
    // Finished past its retention.
    await keptSql(
      started.body,
      "UPDATE async_runs SET created_at = ?, started_at = ?, finished_at = ? WHERE id = ?",
      Date.now() - RUN_RETENTION_MS - 120_000,
      Date.now() - RUN_RETENTION_MS - 90_000,
      Date.now() - RUN_RETENTION_MS - 60_000,
      started.body.run_id,
    );
    expect(await runDurableObjectAlarm(keeper)).toBe(true);
    expect(await keptRun(started.body)).toBeUndefined();
    expect((await poll(api, started.body.status_url, app.token)).status).toBe(404);
    // Nothing left to do: no alarm for the sweep.
    expect(await runInDurableObject(keeper, (_instance, state) => state.storage.getAlarm())).toBeNull();
  });

  it("arms for one run's event as a look at every row would: each run's due work is the five terms of `nextDue`", async () => {
    // The keeper arms after an insert, claim, cancel or end from that run alone (`dueOfRun`) while an
    // alarm is set: that is right only if the earliest of every run's own due equals `nextDue`'s look.
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const keeper = keeperOf(started.body);
    const after = { queuedMs: 11, runningMs: 13, undeliveredMs: 17, retentionMs: 19, keyMs: 23 };
    await runInDurableObject(keeper, async (instance: RunKeeper, state) => {
      state.storage.sql.exec("DELETE FROM async_runs");
      const runs = instance.keeper.runs;
      const ids: string[] = [];
      const add = (at: number, options: { key?: boolean; webhook?: boolean } = {}) => {
        const row = queuedRow(app, at, {
          idempotencyKey: options.key ? `k-${at}` : null,
          webhookEndpoint: options.webhook ? "https://hooks.example/in" : null,
        });
        expect(runs.insert(row)).toBe("taken");
        ids.push(row.id);
        return row.id;
      };
      const each = () => ids.map((id) => dueOfRun(runs.byId(id)!, after)).filter((at) => at !== null);
      const earliest = () => (each().length === 0 ? null : Math.min(...each()));
      // Each state, and each term brought to the front in turn by the times chosen.
      add(1_000, { key: true });
      expect(runs.nextDue(after)).toBe(earliest());
      const running = add(900);
      runs.claim(running, "m-1", new Date(950));
      expect(runs.nextDue(after)).toBe(950 + 13);
      expect(runs.nextDue(after)).toBe(earliest());
      const undelivered = add(800, { webhook: true });
      runs.claim(undelivered, "m-2", new Date(810));
      runs.end(undelivered, "running", "m-2", endingAt(820, { status: "failed" }));
      expect(runs.nextDue(after)).toBe(820 + 17);
      expect(runs.nextDue(after)).toBe(earliest());
      runs.deliveryNoted(undelivered, "dlv_x");
      expect(runs.nextDue(after)).toBe(earliest());
      const cancelled = add(700, { webhook: true, key: true });
      runs.cancel(app.appName, cancelled, new Date(705));
      expect(runs.nextDue(after)).toBe(700 + 23);
      expect(runs.nextDue(after)).toBe(earliest());
      const ended = add(600, { key: true });
      runs.claim(ended, "m-3", new Date(601));
      runs.end(ended, "running", "m-3", endingAt(602));
      expect(runs.nextDue(after)).toBe(earliest());
      state.storage.sql.exec("DELETE FROM async_runs");
      ids.length = 0;
      expect(runs.nextDue(after)).toBeNull();
      expect(earliest()).toBeNull();
    });
  });

  it("holds a keeper at a steady run count over 30 simulated days at its ceiling: retention outpaces arrivals", async () => {
    // Compressed time: a keeper taking runs at its ceiling (about 1,000 requests a second, 3 per run: ~330
    // runs a second) is scaled down to 6 runs per simulated hour, each ended at once, its alarm sweeping
    // every simulated 2 hours (in production it sweeps as soon as work is due, at most a second apart:
    // far more often per run than here). What must hold whatever the scale: the count never passes what
    // 7 days of arrivals plus one sweep's lag leave, every key is freed after its 24 hours, and the
    // storage stops growing once the retention's steady state is reached (SQLite reuses freed pages).
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const keeper = keeperOf(started.body);
    const perHour = 6;
    const stepMs = 2 * 3_600_000;
    const start = api.clock.now().getTime();
    let most = 0;
    let keyed = 0;
    let bytesAtDay8 = 0;
    let bytesAtEnd = 0;
    await runInDurableObject(keeper, async (instance: RunKeeper, state) => {
      const runs = instance.keeper.runs;
      for (let at = start; at < start + 30 * 24 * 3_600_000; at += stepMs) {
        for (let i = 0; i < (perHour * stepMs) / 3_600_000; i++) {
          const row = queuedRow(app, at, { requestBody: "x".repeat(512), idempotencyKey: `k-${at}-${i}` });
          expect(runs.insert(row)).toBe("taken");
          runs.claim(row.id, `m-${row.id}`, new Date(at));
          runs.end(row.id, "running", `m-${row.id}`, endingAt(at, { result: "y".repeat(512) }));
        }
        await instance.keeper.sweep({ now: () => new Date(at + stepMs) });
        const count = state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM async_runs").one().n;
        most = Math.max(most, count);
        keyed = state.storage.sql
          .exec<{ n: number }>(
            "SELECT count(*) AS n FROM async_runs WHERE idempotency_key IS NOT NULL AND created_at < ?",
            at + stepMs - IDEMPOTENCY_WINDOW_MS,
          )
          .one().n;
        expect(keyed).toBe(0);
        if (at - start < 8 * 24 * 3_600_000) bytesAtDay8 = state.storage.sql.databaseSize;
        bytesAtEnd = state.storage.sql.databaseSize;
      }
    });
    expect(bytesAtEnd).toBeLessThanOrEqual(bytesAtDay8 * 1.25);
    // 7 days of arrivals, plus one step's, plus the one run the test began with.
    expect(most).toBeLessThanOrEqual(perHour * (RUN_RETENTION_MS / 3_600_000) + (perHour * stepMs) / 3_600_000 + 1);
    expect(most).toBeGreaterThan(perHour * 24 * 6);
    // A sweep takes at most RUN_SLICE_MAX finished runs: more arrive in no step of this test's.
    expect((perHour * stepMs) / 3_600_000).toBeLessThan(RUN_SLICE_MAX);
  }, 60_000);
});

describe("runs D1 held before the move (issue 41 Must 5)", () => {
  /** A run as the code before wrote it, in D1's `async_runs` (today's schema). */
  function d1Row(app: Awaited<ReturnType<typeof seedRunnable>>, at: Date, changes: Partial<NewAsyncRun> = {}) {
    return {
      id: newId("run", at.getTime()),
      projectId: app.projectId,
      appName: app.appName,
      status: "queued" as const,
      method: "POST",
      appUrl: `${PEER}/upstream/echo/run`,
      appPath: "run",
      requestHeaders: JSON.stringify([["content-type", "application/json"]]),
      requestBody: JSON.stringify({ inputs: { n: 1 } }),
      requestId: newId("req"),
      requestHash: "",
      caller: "",
      createdAt: at,
      ...changes,
    };
  }

  it("are read, listed, cancelled, claimed and swept where they are, and named by their key, until they are gone", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const now = api.clock.now();
    const finished = d1Row(app, new Date(now.getTime() - 60_000), {
      status: "succeeded",
      resultStatus: 200,
      resultType: "application/json",
      resultBytes: 11,
      result: '{"old":true}',
      startedAt: new Date(now.getTime() - 59_000),
      finishedAt: new Date(now.getTime() - 58_000),
      requestBody: null,
    });
    const queued = d1Row(app, new Date(now.getTime() - 50_000), {
      idempotencyKey: "before-move",
      caller: `sa:${app.serviceAccountId}`,
    });
    const cancellable = d1Row(app, new Date(now.getTime() - 40_000));
    const stale = d1Row(app, new Date(now.getTime() - 30_000), {
      status: "running",
      startedAt: new Date(now.getTime() - 30_000),
      claimedBy: "msg-lost",
    });
    for (const row of [finished, queued, cancellable, stale]) expect(await insertRun(db, row)).toBe(true);
    forgetLegacyRuns();
    const urlOf = (id: string) => `http://localhost/v4/${app.projectId}/${app.appName}/runs/${id}`;
    const address = (id: string) => ({ run_id: id, status_url: urlOf(id) });

    // Read: the D1 run's state and result, as before.
    const read = await poll(api, urlOf(finished.id), app.token);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ run_id: finished.id, status: "succeeded", result: { old: true } });

    // Listed with the runs kept since, newest first.
    const kept = await startAsync(api, app);
    const list = await api.json<{ data: { run_id: string }[] }>(`/v2/projects/${app.projectId}/async-runs`, {
      token: ADMIN,
    });
    expect(list.body.data.map((run) => run.run_id)).toEqual([
      kept.body.run_id,
      stale.id,
      cancellable.id,
      queued.id,
      finished.id,
    ]);

    // A key a D1 run holds names that run: the same request answers it, nothing new is kept.
    const replay = await startAsync(api, app, {
      headers: { "Idempotency-Key": "before-move" },
      body: { inputs: { n: 1 } },
    });
    expect(replay.response.status).toBe(422);
    expect(replay.body).toMatchObject({ code: "idempotency_key_reused", run_id: queued.id });

    // Cancelled where it is.
    const cancelled = await api.json(new URL(urlOf(cancellable.id)).pathname, { method: "DELETE", token: app.token });
    expect(cancelled.status).toBe(200);
    expect((await runById(db, cancellable.id))!.status).toBe("cancelled");

    // A queue message sent before the move: claimed and run in D1.
    expect(await consume(api, { v: 1, run_id: queued.id, project_id: app.projectId })).toMatchObject({ acked: true });
    expect((await runById(db, queued.id))!.status).toBe("succeeded");
    expect(await keptRun(address(queued.id))).toBeUndefined();

    // The cron still sweeps D1's runs: one left running past a consumer's lifetime ends interrupted.
    api.clock.advance(RUNNING_MAX_MS);
    await createWorker(testDeps({ now: api.clock.now })).scheduled(
      createScheduledController({ cron: CRONS.asyncRuns }),
      env,
      createExecutionContext(),
    );
    expect((await runById(db, stale.id))!).toMatchObject({ status: "failed", errorCode: "interrupted" });

    // Past their retention, D1's runs are gone, and the isolate stops asking D1 once it has looked again.
    api.clock.advance(RUN_RETENTION_MS + 60_000);
    await createWorker(testDeps({ now: api.clock.now })).scheduled(
      createScheduledController({ cron: CRONS.asyncRuns }),
      env,
      createExecutionContext(),
    );
    await sweepKept(kept.body, api.clock.now);
    expect(await d1Runs(app.projectId)).toBe(0);
    forgetLegacyRuns();
    // Other test files share no D1 with this one (storage is per file): empty means empty.
    expect(await legacyRuns(db)).toBe(false);
    expect((await poll(api, urlOf(finished.id), app.token)).status).toBe(404);

    // A Worker of the code before writes one more run there (a gradual deployment) while this isolate
    // holds D1 for empty: its message still claims and runs it.
    const late = d1Row(app, api.clock.now());
    expect(await insertRun(db, late)).toBe(true);
    expect(await consume(api, { v: 1, run_id: late.id, project_id: app.projectId })).toMatchObject({ acked: true });
    expect((await runById(db, late.id))!.status).toBe("succeeded");
  });
});
