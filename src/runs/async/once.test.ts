import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  consume,
  failingKeepers,
  gatedOutbound,
  type KeptRunAddress,
  keptRows,
  keptRun,
  keptSql,
  poll,
  startAsync,
  sweepKept,
} from "../../../test/async-runs";
import { type Client, client } from "../../../test/helpers";
import { PEER, received, receiver } from "../../../test/peers";
import { capturingQueue, seedRunnable } from "../../../test/runs";
import { drive } from "../../../test/webhooks";
import { RESULT_DELIVERY_MAX_MS, QUEUED_MAX_MS, RUN_RETENTION_MS, RUNNING_MAX_MS } from "./sweep";
import type { DeliveryMessage } from "../../webhooks/message";
import { QUEUES } from "../../platform/triggers";
import { changeInDeliveryStores, rowsInDeliveryStores } from "../../../test/delivery-stores";

const api = client();

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

const cancel = (statusUrl: string, token: string) => api.json(new URL(statusUrl).pathname, { method: "DELETE", token });
/** The sweep of each of `runs`' keepers at `c`'s clock (what one run of the async-runs cron did for D1's runs). */
const sweep = async (c: Client, ...runs: KeptRunAddress[]) => {
  for (const run of runs) await sweepKept(run, c.clock.now);
};
/** The delivery log's records of run `runId`. */
const deliveryRecords = async (runId: string) =>
  (await rowsInDeliveryStores("SELECT id FROM webhook_deliveries WHERE run_id = ?", [runId], runId)).length;

describe("cancel: DELETE …/runs/{run_id}", () => {
  it("cancels a queued run (200), again the same 200; the consumer then runs nothing", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const first = await cancel(started.body.status_url, app.token);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      run_id: started.body.run_id,
      status: "cancelled",
      result: null,
      finished_at: api.clock.now().toISOString(),
    });
    api.clock.advance(1_000);
    const again = await cancel(started.body.status_url, app.token);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const upstream = gatedOutbound();
    expect(await consume(api, started.message, { deps: { outbound: upstream.outbound } })).toMatchObject({
      acked: true,
    });
    expect(upstream.calls).toBe(0);
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("cancelled");
  });

  it("answers 409 for a running and for a finished run, and changes nothing", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const upstream = gatedOutbound();
    upstream.hold();
    const consumed = consume(api, started.message, { deps: { outbound: upstream.outbound } });
    await upstream.reached;
    const running = await cancel(started.body.status_url, app.token);
    expect(running.status).toBe(409);
    expect(running.body).toMatchObject({
      code: "run_not_cancellable",
      status: 409,
      run_status: "running",
      run_id: started.body.run_id,
    });
    upstream.release();
    await consumed;
    const finished = await cancel(started.body.status_url, app.token);
    expect(finished.status).toBe(409);
    expect(finished.body).toMatchObject({ status: 409, run_status: "succeeded" });
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("succeeded");
  });

  it("races the consumer: exactly one of them wins, every time", async () => {
    const app = await seedRunnable(api);
    const outcomes = new Set<string>();
    for (let trial = 0; trial < 16; trial++) {
      const started = await startAsync(api, app);
      const upstream = gatedOutbound();
      // The consumer starts a few turns of the event loop after the cancel (none in the first trials),
      // so that either side gets to its conditional write first in some trials.
      const [cancelled] = await Promise.all([
        cancel(started.body.status_url, app.token),
        (async () => {
          for (let i = 0; i < trial * 2; i++) await new Promise((resolve) => setTimeout(resolve, 0));
          return consume(api, started.message, { deps: { outbound: upstream.outbound } });
        })(),
      ]);
      const final = (await poll(api, started.body.status_url, app.token)).body.status;
      if (cancelled.status === 200) {
        expect(final).toBe("cancelled");
        expect(upstream.calls).toBe(0);
      } else {
        expect(cancelled.status).toBe(409);
        expect(final).toBe("succeeded");
        expect(upstream.calls).toBe(1);
      }
      outcomes.add(final);
    }
    // The stagger lets each side win at least once, so both branches above were checked.
    expect([...outcomes].sort()).toEqual(["cancelled", "succeeded"]);
  });
});

describe("at most once", () => {
  it("a redelivered message and a duplicate copy find the run finished and do not call the app again", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const started = await startAsync(api, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    const upstream = gatedOutbound();
    const first = await consume(api, started.message, { id: "msg-once", deps: { outbound: upstream.outbound } });
    expect(first.deliveries).toHaveLength(1);
    const again = await consume(api, started.message, {
      id: "msg-once",
      attempts: 2,
      deps: { outbound: upstream.outbound },
    });
    const copy = await consume(api, started.message, { id: "msg-copy", deps: { outbound: upstream.outbound } });
    // The redelivery of the message that ended it may hand on again its delivery, never attempted: the
    // same one (its id), never a second; a copy under another message id hands on nothing.
    expect(again).toMatchObject({ acked: true });
    const firstId = (first.deliveries[0] as DeliveryMessage).id;
    for (const m of again.deliveries as DeliveryMessage[]) expect(m.id).toBe(firstId);
    expect(copy).toMatchObject({ acked: true, deliveries: [] });
    expect(await deliveryRecords(started.body.run_id)).toBe(1);
    expect(upstream.calls).toBe(1);
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("succeeded");
  });

  it("a redelivered message hands on again the delivery written with its run's end but never handed on (its consumer died in between), under its own id", async () => {
    const local = client();
    const app = await seedRunnable(local);
    const hook = await receiver();
    const started = await startAsync(local, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    // The consumer ends the run with its delivery on record; its hand-on is kept here, as if it died then
    // (its message never acked: the queue delivers it again).
    const died = await consume(local, started.message, { id: "msg-ended" });
    expect(died.deliveries).toHaveLength(1);
    const run = await keptRun(started.body);
    expect(run).toMatchObject({
      status: "succeeded",
      webhookSecret: null,
      deliveryId: (died.deliveries[0] as DeliveryMessage).id,
    });
    const upstream = gatedOutbound();
    const redelivered = await consume(local, started.message, {
      id: "msg-ended",
      attempts: 2,
      deps: { outbound: upstream.outbound },
    });
    expect(redelivered.acked).toBe(true);
    expect(upstream.calls).toBe(0);
    expect(redelivered.deliveries).toHaveLength(1);
    expect(redelivered.deliveries[0]).toMatchObject({
      id: run!.deliveryId,
      runId: run!.id,
      body: { inline: run!.result },
    });
    expect(await deliveryRecords(run!.id)).toBe(1);
    await drive(local, redelivered.deliveries[0]);
    const got = await received(hook.key);
    expect(got).toHaveLength(1);
    expect(got[0]!.body).toBe(run!.result);
  });

  it("a dead letter (the queue gave up on the message, its copy has an id of its own) of a run ended with its delivery never handed on hands it on; a new message would not", async () => {
    const local = client();
    const app = await seedRunnable(local);
    const hook = await receiver();
    const started = await startAsync(local, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    // The consumer ends the run with its delivery on record and dies before handing it on, on its last try.
    const died = await consume(local, started.message, { id: "msg-last", attempts: 4 });
    expect(died.deliveries).toHaveLength(1);
    const run = await keptRun(started.body);
    const upstream = gatedOutbound();
    // Another message (a duplicate under another id) does not take the claim for its own ...
    expect(await consume(local, started.message, { id: "msg-other", deps: { outbound: upstream.outbound } })).toEqual({
      acked: true,
      retried: false,
      deliveries: [],
    });
    // ... the dead letter does.
    const dead = await consume(local, started.message, {
      id: "dl-1",
      queue: QUEUES.asyncRunDeadLetters,
      deps: { outbound: upstream.outbound },
    });
    expect(dead.acked).toBe(true);
    expect(upstream.calls).toBe(0);
    expect(dead.deliveries).toHaveLength(1);
    expect(dead.deliveries[0]).toMatchObject({ id: run!.deliveryId, runId: run!.id, body: { inline: run!.result } });
    expect(await deliveryRecords(run!.id)).toBe(1);
    await drive(local, dead.deliveries[0]);
    expect((await received(hook.key))[0]!.body).toBe(run!.result);
    // Once attempted, another dead letter adds nothing.
    expect(
      (await consume(local, started.message, { id: "dl-2", queue: QUEUES.asyncRunDeadLetters })).deliveries,
    ).toEqual([]);
  });

  it("a dead letter of a run left running (every try of its message died) ends it interrupted, without calling the app, and delivers that", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const started = await startAsync(api, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    expect(await keptRows(started.body).claim(started.body.run_id, "msg-died", api.clock.now())).toBeDefined();
    const upstream = gatedOutbound();
    const dead = await consume(api, started.message, {
      id: "dl-running",
      queue: QUEUES.asyncRunDeadLetters,
      deps: { outbound: upstream.outbound },
    });
    expect(dead.acked).toBe(true);
    expect(upstream.calls).toBe(0);
    const done = await poll(api, started.body.status_url, app.token);
    expect(done.body).toMatchObject({ status: "failed", error: { code: "interrupted" } });
    expect(dead.deliveries).toHaveLength(1);
    await drive(api, dead.deliveries[0]);
    expect((await received(hook.key))[0]!.body).toBe(done.rawResult);
  });

  it("a dead letter of a run still queued (every claim failed) runs it, once", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const upstream = gatedOutbound();
    const failed = await consume(api, started.message, {
      id: "msg-unclaimed",
      attempts: 4,
      bindings: { RUN_KEEPER: failingKeepers("claim") },
    });
    expect(failed).toMatchObject({ acked: false, retried: true });
    expect((await keptRun(started.body))!.status).toBe("queued");
    for (const id of ["dl-queued", "dl-queued-copy"])
      expect(
        await consume(api, started.message, {
          id,
          queue: QUEUES.asyncRunDeadLetters,
          deps: { outbound: upstream.outbound },
        }),
      ).toMatchObject({ acked: true });
    expect(upstream.calls).toBe(1);
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("succeeded");
  });

  it("a copy arriving while the run is running does not run it too", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const upstream = gatedOutbound();
    upstream.hold();
    const consumed = consume(api, started.message, { id: "msg-a", deps: { outbound: upstream.outbound } });
    await upstream.reached;
    expect(await consume(api, started.message, { id: "msg-b", deps: { outbound: upstream.outbound } })).toMatchObject({
      acked: true,
      deliveries: [],
    });
    upstream.release();
    await consumed;
    expect(upstream.calls).toBe(1);
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("succeeded");
  });

  it("a consumer that died mid-run: its redelivered message ends the run failed (interrupted) without running it, and delivers that", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const started = await startAsync(api, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    // The first invocation claimed the run, called the app and died before writing anything else.
    expect(await keptRows(started.body).claim(started.body.run_id, "msg-died", api.clock.now())).toBeDefined();
    const upstream = gatedOutbound();
    const redelivered = await consume(api, started.message, {
      id: "msg-died",
      attempts: 2,
      deps: { outbound: upstream.outbound },
    });
    expect(redelivered.acked).toBe(true);
    expect(upstream.calls).toBe(0);
    const done = await poll(api, started.body.status_url, app.token);
    expect(done.body).toMatchObject({ status: "failed", status_code: 502, error: { code: "interrupted" } });
    expect(done.body.result).toMatchObject({ code: "run_interrupted", run_id: started.body.run_id });
    expect(redelivered.deliveries).toHaveLength(1);
    await drive(api, redelivered.deliveries[0]);
    expect((await received(hook.key))[0]!.body).toBe(done.rawResult);
    // Yet another copy changes nothing.
    expect(await consume(api, started.message, { id: "msg-died", attempts: 3 })).toMatchObject({
      acked: true,
      deliveries: [],
    });
  });

  it("a consumer whose write of the end fails after the app answered hands the message back; the redelivery ends it interrupted, the app called once", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const upstream = gatedOutbound();
    const crashed = await consume(api, started.message, {
      id: "msg-crash",
      deps: { outbound: upstream.outbound },
      bindings: { RUN_KEEPER: failingKeepers("end") },
    });
    expect(crashed).toMatchObject({ acked: false, retried: true });
    expect((await keptRun(started.body))!.status).toBe("running");
    const redelivered = await consume(api, started.message, {
      id: "msg-crash",
      attempts: 2,
      deps: { outbound: upstream.outbound },
    });
    expect(redelivered.acked).toBe(true);
    expect(upstream.calls).toBe(1);
    expect((await poll(api, started.body.status_url, app.token)).body).toMatchObject({
      status: "failed",
      error: { code: "interrupted" },
    });
  });

  it("a claim that fails (its keeper unavailable) hands the message back with nothing run; the retry runs it", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const upstream = gatedOutbound();
    const failed = await consume(api, started.message, {
      deps: { outbound: upstream.outbound },
      bindings: { RUN_KEEPER: failingKeepers("claim") },
    });
    expect(failed).toMatchObject({ acked: false, retried: true });
    expect(upstream.calls).toBe(0);
    expect((await keptRun(started.body))!.status).toBe("queued");
    await consume(api, started.message, { attempts: 2, deps: { outbound: upstream.outbound } });
    expect(upstream.calls).toBe(1);
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("succeeded");
  });
});

describe("the cron sweep", () => {
  it("ends a run left running past a consumer's lifetime as interrupted, and one never started as expired; neither runs", async () => {
    const local = client();
    const app = await seedRunnable(local);
    const running = await startAsync(local, app);
    const queued = await startAsync(local, app);
    await keptRows(running.body).claim(running.body.run_id, "msg-lost", local.clock.now());
    local.clock.advance(RUNNING_MAX_MS - 1_000);
    await sweep(local, running.body, queued.body);
    expect((await keptRun(running.body))!.status).toBe("running");
    local.clock.advance(2_000);
    await sweep(local, running.body, queued.body);
    expect((await poll(local, running.body.status_url, app.token)).body).toMatchObject({
      status: "failed",
      error: { code: "interrupted" },
    });
    expect((await keptRun(queued.body))!.status).toBe("queued");
    local.clock.advance(QUEUED_MAX_MS);
    await sweep(local, running.body, queued.body);
    expect((await poll(local, queued.body.status_url, app.token)).body).toMatchObject({
      status: "failed",
      error: { code: "expired" },
    });
    const upstream = gatedOutbound();
    expect(await consume(local, queued.message, { deps: { outbound: upstream.outbound } })).toMatchObject({
      acked: true,
    });
    expect(upstream.calls).toBe(0);
  });

  it("hands a finished run's result to the webhook pipeline when its consumer died before doing so, exactly once", async () => {
    const local = client();
    const app = await seedRunnable(local);
    const hook = await receiver();
    const lost = await startAsync(local, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    const noted = await startAsync(local, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    await consume(local, lost.message);
    await consume(local, noted.message);
    // `lost`: the consumer died right after ending the run (no delivery recorded); `noted`: right after
    // the delivery was recorded, before the run noted it.
    await changeInDeliveryStores(
      "DELETE FROM webhook_deliveries WHERE run_id = ?",
      [lost.body.run_id],
      lost.body.run_id,
    );
    for (const run of [lost.body, noted.body])
      await keptSql(run, "UPDATE async_runs SET delivery_id = NULL WHERE id = ?", run.run_id);
    const capture = capturingQueue();
    const sweepWith = async () => {
      for (const run of [lost.body, noted.body]) await sweepKept(run, local.clock.now, capture.bindings);
    };
    await sweepWith();
    expect(capture.sent).toEqual([]);
    local.clock.advance(RESULT_DELIVERY_MAX_MS + 1_000);
    await sweepWith();
    await sweepWith();
    const sentFor = (runId: string) => (capture.sent as DeliveryMessage[]).filter((m) => m.runId === runId);
    expect(sentFor(lost.body.run_id)).toHaveLength(1);
    const stored = await keptRun(lost.body);
    expect(sentFor(lost.body.run_id)[0]!.body).toEqual({ inline: stored!.result });
    expect(stored!.deliveryId).toBe(sentFor(lost.body.run_id)[0]!.id);
    // `noted`'s recorded delivery, still without an attempt, may be handed on again: under its own id.
    const notedRun = await keptRun(noted.body);
    expect(notedRun!.deliveryId).toMatch(/^whd_/);
    for (const m of sentFor(noted.body.run_id)) expect(m.id).toBe(notedRun!.deliveryId);
    expect(await deliveryRecords(lost.body.run_id)).toBe(1);
    expect(await deliveryRecords(noted.body.run_id)).toBe(1);
  });

  it("purges finished runs and their R2 payloads after the retention, and keeps younger ones", async () => {
    const local = client();
    const app = await seedRunnable(local, `${PEER}/upstream/echo?bytes=${400 * 1024}`);
    const old = await startAsync(local, app);
    await consume(local, old.message);
    expect((await keptRun(old.body))!.resultInR2).toBe(true);
    local.clock.advance(RUN_RETENTION_MS - 60_000);
    const young = await startAsync(local, app);
    await consume(local, young.message);
    local.clock.advance(120_000);
    await sweep(local, old.body, young.body);
    expect((await poll(local, old.body.status_url, app.token)).status).toBe(404);
    expect(await keptRun(old.body)).toBeUndefined();
    expect(await env.RUN_PAYLOADS.head(`runs/${old.body.run_id}/result`)).toBeNull();
    expect((await poll(local, young.body.status_url, app.token)).body.status).toBe("succeeded");
  });
});

describe("Idempotency-Key", () => {
  it("answers the same run for the same request within 24 hours, and a new one after", async () => {
    const local = client();
    const app = await seedRunnable(local);
    const headers = { "Idempotency-Key": "order-42" };
    const first = await startAsync(local, app, { headers, body: { n: 1 } });
    local.clock.advance(3_600_000);
    const replay = await startAsync(local, app, { headers, body: { n: 1 } });
    expect(replay.response.status).toBe(202);
    expect(replay.body.run_id).toBe(first.body.run_id);
    expect(replay.response.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.sent).toEqual([]);
    await consume(local, first.message);
    expect((await startAsync(local, app, { headers, body: { n: 1 } })).body).toMatchObject({
      run_id: first.body.run_id,
      status: "succeeded",
    });

    // Another project's same key is its own.
    const other = await seedRunnable(local);
    const theirs = await startAsync(local, other, { headers, body: { n: 1 } });
    expect(theirs.body.run_id).not.toBe(first.body.run_id);

    local.clock.advance(23 * 3_600_000);
    const fresh = await startAsync(local, app, { headers, body: { n: 1 } });
    expect(fresh.response.status).toBe(202);
    expect(fresh.body.run_id).not.toBe(first.body.run_id);
    expect(fresh.sent).toHaveLength(1);
  });

  it("answers 422 for a different request with the same key, naming the run it was used for", async () => {
    const app = await seedRunnable(api);
    const headers = { "Idempotency-Key": "key-422" };
    const first = await startAsync(api, app, { headers, body: { n: 1 } });
    for (const changed of [
      { body: { n: 2 } },
      { body: { n: 1 }, query: "x=1" },
      { body: { n: 1 }, query: `webhookEndpoint=${encodeURIComponent(`${PEER}/hooks/k`)}` },
    ]) {
      const second = await startAsync(api, app, { headers, ...changed });
      expect(second.response.status).toBe(422);
      expect(second.response.headers.get("content-type")).toBe("application/problem+json");
      expect(second.body).toMatchObject({ code: "idempotency_key_reused", run_id: first.body.run_id });
      expect(second.sent).toEqual([]);
    }
  });

  it("is freed by the cron after 24 hours", async () => {
    const local = client();
    const app = await seedRunnable(local);
    const first = await startAsync(local, app, { headers: { "Idempotency-Key": "swept" } });
    expect((await keptRun(first.body))!.idempotencyKey).toBe("swept");
    local.clock.advance(24 * 3_600_000 - 1_000);
    await sweep(local, first.body);
    expect((await keptRun(first.body))!.idempotencyKey).toBe("swept");
    local.clock.advance(1_001);
    await sweep(local, first.body);
    expect((await keptRun(first.body))!.idempotencyKey).toBeNull();
  });
});
