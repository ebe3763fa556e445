import { createExecutionContext, createMessageBatch, getQueueResult, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { attemptRows, deliveryMessages, deliveryRow, until } from "../../test/deliveries";
import {
  claimInStore,
  faultyDeliveryStores,
  rowsInDeliveryStores,
  slowDeliveryStores,
} from "../../test/delivery-stores";
import { client, testDeps } from "../../test/helpers";
import { PEER_MORE, PEER_OTHER, received, receiver } from "../../test/peers";
import { callWith, capturingQueue, seedRunnable, unreachableLanes } from "../../test/runs";
import { recordingStorage, withStorage } from "../../test/storage";
import { SubrequestMeter } from "../platform/subrequests";
import { QUEUES } from "../platform/triggers";
import { createWorker } from "../worker";
import { GAP_MARGIN_MS, Lane } from "./lane";
import { acceptInLane, type DeliveryMessage, laneName, laneObject, queueMessageOf } from "./message";
import { LaneFullError } from "./lane-capacity";
import { LANE_CONCURRENCY } from "./lane-capacity";
import { MAX_ATTEMPTS, MAX_GAP_MS, RETRY_DELAYS_SECONDS } from "./policy";

/**
 * The lanes behind the real local queue broker: messages go in through the Worker's queue binding and
 * the consumer configured in wrangler.toml takes them (its batch size, one batch at a time, as
 * Miniflare's broker and `wrangler dev` do); each hands its deliveries to the real Durable Objects,
 * whose alarms make the attempts. Receivers that time out answer after 10 s; attempts time out after
 * 2 s here (vitest.config.ts), so a slow delivery holds its lane for about 10 s rather than 38 s.
 */

const api = client();

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** Enqueues `messages` in this order through the Worker's queue binding, as the run path does. */
async function enqueue(messages: DeliveryMessage[]): Promise<number> {
  const started = Date.now();
  await env.WEBHOOK_QUEUE.sendBatch(messages.map((body) => ({ body, contentType: "json" as const })));
  return started;
}

/** `count` deliveries, each to a receiver of its own answering `answers`, at `origin`. */
async function deliveriesTo(
  projectId: string,
  count: number,
  answers: Parameters<typeof receiver>[0],
  origin?: string,
) {
  const hooks = await Promise.all(Array.from({ length: count }, () => receiver(answers, undefined, origin)));
  const messages = (
    await Promise.all(hooks.map((h, i) => deliveryMessages(api, projectId, h.url, [`{"n":${i}}`])))
  ).flat();
  return { hooks, messages };
}

const slowAnswer = [{ status: 200, delayMs: 10_000 }];

/** Every request `hooks` have received, once there are at least `n` of them or `withinMs` have passed. */
const requestsTo = (hooks: { key: string }[], n: number, withinMs: number) =>
  until(
    async () => (await Promise.all(hooks.map((h) => received(h.key)))).flat(),
    (all) => all.length >= n,
    withinMs,
  );

describe("a slow receiver holds only its own lane (real queue broker, real Durable Objects)", () => {
  it("10 fast receivers enqueued after 30 that time out all receive within 2 s, and the slow lane opens at most 6 connections", async () => {
    const app = await seedRunnable(api);
    const slow = await deliveriesTo(app.projectId, 30, slowAnswer);
    const fast = await deliveriesTo(app.projectId, 10, [{ status: 204 }], PEER_OTHER);
    const started = await enqueue([...slow.messages, ...fast.messages]);

    const arrivals = await requestsTo(fast.hooks, 10, 2_500);
    expect(arrivals).toHaveLength(10);
    for (const a of arrivals) expect(a.at - started).toBeLessThan(2_000);
    console.log(
      `10 fast deliveries behind 30 slow ones on the real queue: the last arrived after ${Math.max(...arrivals.map((a) => a.at)) - started} ms`,
    );
    // Politeness: before the first timeout (2 s) ends, the slow lane has at most LANE_CONCURRENCY requests out.
    const slowSoFar = (await Promise.all(slow.hooks.map((h) => received(h.key))))
      .flat()
      .filter((r) => r.at - started < 1_900);
    expect(slowSoFar.length).toBeGreaterThan(0);
    expect(slowSoFar.length).toBeLessThanOrEqual(LANE_CONCURRENCY);
    // In order of arrival: the first six enqueued are the six in flight.
    const firstSix = await Promise.all(slow.hooks.slice(0, LANE_CONCURRENCY).map((h) => received(h.key)));
    expect(firstSix.every((r) => r.length === 1)).toBe(true);
  }, 20_000);

  it("a 404 enqueued after slow ones gets its 3 attempts, the first within 2 s and each gap ≤ 5 s", async () => {
    const app = await seedRunnable(api);
    const slow = await deliveriesTo(app.projectId, 5, slowAnswer);
    const missing = await deliveriesTo(app.projectId, 1, [{ status: 404 }], PEER_OTHER);
    const started = await enqueue([...slow.messages, ...missing.messages]);
    const id = missing.messages[0]!.id;

    const row = await until(
      () => deliveryRow(id),
      (r) => r?.status === "failed",
      10_000,
    );
    expect(row).toMatchObject({ status: "failed", attempt_count: MAX_ATTEMPTS, last_status_code: 404 });
    const requests = await received(missing.hooks[0]!.key);
    expect(requests).toHaveLength(MAX_ATTEMPTS);
    expect(requests[0]!.at - started).toBeLessThan(2_000);
    const attempts = await attemptRows(id);
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3]);
    const times = await attemptTimes(id);
    for (let n = 1; n < times.length; n++) {
      // From the end of one attempt (its start + its duration) to the start of the next.
      expect(
        times[n]!.at - (times[n - 1]!.at + times[n - 1]!.durationMs),
        `gap before attempt ${n + 1}`,
      ).toBeLessThanOrEqual(MAX_GAP_MS);
    }
  }, 20_000);

  it("beside a lane saturated by 35 receivers that hold each connection for the whole timeout, a 404 gets its 3 attempts on time and fast receivers stay fast", async () => {
    const app = await seedRunnable(api);
    // The receiver answers after the attempt's timeout: each slow delivery holds a connection for the whole timeout, 3 times.
    const slow = await deliveriesTo(app.projectId, 35, slowAnswer);
    const [fastOrigin, missingOrigin, laterOrigin] = PEER_MORE as [string, string, string];
    const fast = await deliveriesTo(app.projectId, 5, [{ status: 204 }], fastOrigin);
    const missing = await deliveriesTo(app.projectId, 1, [{ status: 404 }], missingOrigin);
    const later = await deliveriesTo(app.projectId, 5, [{ status: 204 }], laterOrigin);

    // 30 slow ones fill the lane (6 in flight, 24 waiting), then fast ones on another origin.
    await enqueue(slow.messages.slice(0, 30));
    const fastStarted = await enqueue(fast.messages);
    const fastArrivals = await requestsTo(fast.hooks, 5, 2_500);
    expect(fastArrivals).toHaveLength(5);
    for (const a of fastArrivals) expect(a.at - fastStarted).toBeLessThan(2_000);
    // Once the first slow ones have timed out and wait for their retries: 5 more slow ones, a 404 on an origin of its own, fast ones.
    await requestsTo(slow.hooks.slice(0, 6), 12, 8_000);
    await enqueue(slow.messages.slice(30));
    const started = await enqueue([...missing.messages, ...later.messages]);

    const laterArrivals = await requestsTo(later.hooks, 5, 2_500);
    expect(laterArrivals).toHaveLength(5);
    for (const a of laterArrivals) expect(a.at - started).toBeLessThan(2_000);
    const requests = await until(
      () => received(missing.hooks[0]!.key),
      (r) => r.length >= MAX_ATTEMPTS,
      12_000,
    );
    expect(
      requests.map((r) => r.at - started),
      "the 404's attempts, ms after it was enqueued",
    ).toHaveLength(MAX_ATTEMPTS);
    expect(requests[0]!.at - started).toBeLessThan(2_000);
    for (let n = 1; n < requests.length; n++)
      expect(requests[n]!.at - requests[n - 1]!.at, `gap before attempt ${n + 1}`).toBeLessThanOrEqual(MAX_GAP_MS);
    const row = await until(
      () => deliveryRow(missing.messages[0]!.id),
      (r) => r?.status === "failed",
      3_000,
    );
    expect(row).toMatchObject({ status: "failed", attempt_count: MAX_ATTEMPTS, last_status_code: 404 });
  }, 40_000);

  it("the outcome table holds with slow receivers in the same batches", async () => {
    const app = await seedRunnable(api);
    const kinds = [
      { name: "200", answers: [{ status: 200 }], status: "delivered", attempts: 1 },
      { name: "404", answers: [{ status: 404 }], status: "failed", attempts: 3 },
      // A 410 also disables its receiver (receiver-controls.ts): on an origin of its own, so the table's others go on.
      { name: "410", answers: [{ status: 410 }], status: "failed", attempts: 1, origin: PEER_MORE[0] },
      { name: "500", answers: [{ status: 500 }], status: "failed", attempts: 1 },
      {
        name: "302",
        answers: [{ status: 302, headers: { Location: "https://example.com/" } }],
        status: "failed",
        attempts: 3,
      },
      { name: "404 then 204", answers: [{ status: 404 }, { status: 204 }], status: "delivered", attempts: 2 },
      { name: "503 then 200", answers: [{ status: 503 }, { status: 200 }], status: "failed", attempts: 1 },
    ];
    const slow = await deliveriesTo(app.projectId, 14, slowAnswer);
    const table = await Promise.all(
      kinds.map((k) => deliveriesTo(app.projectId, 1, k.answers, "origin" in k ? k.origin : PEER_OTHER)),
    );
    // Two slow deliveries before each of the table's: every batch of 10 mixes them.
    const order = kinds.flatMap((_, i) => [slow.messages[2 * i]!, slow.messages[2 * i + 1]!, table[i]!.messages[0]!]);
    await enqueue(order);
    for (const [i, kind] of kinds.entries()) {
      const id = table[i]!.messages[0]!.id;
      const row = await until(
        () => deliveryRow(id),
        (r) => r?.status !== "pending",
        10_000,
      );
      expect(row, kind.name).toMatchObject({ status: kind.status, attempt_count: kind.attempts });
      expect(await received(table[i]!.hooks[0]!.key), kind.name).toHaveLength(kind.attempts);
    }
  }, 30_000);
});

/** The lane of `message`, its alarms bounded at `subrequests` each. */
async function laneWithSubrequests(message: DeliveryMessage, subrequests: number) {
  const lane = laneObject(env, laneName(message));
  await runInDurableObject(lane, (instance: { lane: Lane }) => {
    instance.lane.subrequestsPerAlarm = subrequests;
  });
  return lane;
}

/** Waits for each of `messages` (to receivers answering 404) to fail after its last attempt, within `withinMs`. */
async function failedAfterEveryAttempt(messages: DeliveryMessage[], withinMs: number) {
  for (const m of messages)
    expect(
      await until(
        () => deliveryRow(m.id),
        (r) => r?.status === "failed",
        withinMs,
      ),
    ).toMatchObject({ status: "failed", attempt_count: MAX_ATTEMPTS, last_status_code: 404 });
}

describe("an alarm's bound never makes a retry miss its gap", () => {
  it("with 200 subrequests an alarm, 12 deliveries answered 404 (after 100 or 900 ms) get their 3 attempts each over several alarms, every retry within its gap", async () => {
    const app = await seedRunnable(api);
    // Answers of two lengths, interleaved, so that retries come due while attempts are in flight.
    const quick = await deliveriesTo(app.projectId, 6, [{ status: 404, delayMs: 100 }], PEER_MORE[2]);
    const slow = await deliveriesTo(app.projectId, 6, [{ status: 404, delayMs: 900 }], PEER_MORE[2]);
    const messages = quick.messages.flatMap((m, i) => [m, slow.messages[i]!]);
    // The subrequests' bound of one alarm, lowered so that the deliveries cross it again and again.
    const lane = await laneWithSubrequests(messages[0]!, 200);
    const lines = vi.spyOn(console, "log").mockImplementation(() => undefined);
    expect((await lane.accept(messages)).stored).toEqual(Array(12).fill(true));
    await failedAfterEveryAttempt(messages, 30_000);
    // Each alarm's line, once it has ended (the last one lingers for a moment after the last attempt).
    const alarmsOf = () =>
      lines.mock.calls
        .map(([line]) => line as { message?: string; lane_id?: string; attempts?: number; subrequests?: number })
        .filter((l) => l.message === "webhook lane alarm" && l.lane_id === lane.id.toString() && (l.attempts ?? 0) > 0);
    const alarms = await until(
      async () => alarmsOf(),
      (a) => a.reduce((sum, l) => sum + l.attempts!, 0) >= 12 * MAX_ATTEMPTS,
      10_000,
    );
    expect(alarms.length).toBeGreaterThanOrEqual(2);
    // Each alarm within its subrequests as it made them (the settings' read is the one kept beside them).
    expect(Math.max(...alarms.map((a) => a.subrequests!))).toBeLessThan(200);
    // … counted, not assumed: at least its POST for each attempt.
    for (const a of alarms) expect(a.subrequests!).toBeGreaterThanOrEqual(a.attempts!);
    expect(alarms.reduce((sum, a) => sum + a.attempts!, 0)).toBe(12 * MAX_ATTEMPTS);
    // Each retry starts when its pause ends, or, when its alarm is closing, by the next alarm: after the
    // attempts in flight (here up to 900 ms) and the next alarm's start, only if its gap allows it. An
    // alarm past its bound that stopped starting retries whatever their gaps made them miss it.
    for (const m of messages) {
      const times = await attemptTimes(m.id);
      expect(times).toHaveLength(MAX_ATTEMPTS);
      for (let n = 1; n < times.length; n++) {
        const gap = times[n]!.at - (times[n - 1]!.at + times[n - 1]!.durationMs);
        // Within the gap the lane plans for (the spec's less its margin), give or take a turn of the lane.
        expect(gap, `gap before attempt ${n + 1}`).toBeLessThanOrEqual(MAX_GAP_MS - GAP_MARGIN_MS + 150);
        expect(gap - RETRY_DELAYS_SECONDS[n - 1]! * 1000, `lateness of attempt ${n + 1}`).toBeLessThanOrEqual(
          // The hold planned for what is in flight (twice the longest, 900 ms) and the next alarm's start.
          2 * 900 + 1_000,
        );
      }
    }
  }, 60_000);
});

describe("a lane's alarm counts its subrequests", () => {
  it("a call to a Durable Object through the metered env is one (the alert of a receiver passes a delivery to its lane)", async () => {
    const meter = new SubrequestMeter();
    const lane = laneObject(meter.env(env), "metered-lane");
    expect(meter.made).toBe(0);
    expect(await lane.pending()).toEqual([]);
    expect(meter.made).toBe(1);
  });
});

describe("a lane whose retries owed need more than a whole alarm", () => {
  it("starts its retries as they come due and sets its next alarm for them, not again and again for first attempts it cannot start", async () => {
    const app = await seedRunnable(api);
    const { messages } = await deliveriesTo(app.projectId, 8, [{ status: 404, delayMs: 50 }], PEER_MORE[2]);
    // 200 subrequests: a fresh alarm keeps 9 attempts at worst, so it opens first attempts only while at most
    // 3 deliveries are under way; with 4 under way even a fresh one is closed.
    const lane = await laneWithSubrequests(messages[0]!, 200);
    const lines = vi.spyOn(console, "log").mockImplementation(() => undefined);
    expect((await lane.accept(messages)).stored).toEqual(Array(8).fill(true));
    await failedAfterEveryAttempt(messages, 40_000);
    const alarms = lines.mock.calls
      .map(([line]) => line as { message?: string; lane_id?: string })
      .filter((l) => l.message === "webhook lane alarm" && l.lane_id === lane.id.toString());
    // 24 attempts in a few dozen alarms at most: an alarm set for a first attempt it could not start ended
    // at once and was set again, hundreds of times a second.
    expect(alarms.length).toBeLessThan(50);
    for (const m of messages) {
      const times = await attemptTimes(m.id);
      for (let n = 1; n < times.length; n++)
        expect(times[n]!.at - (times[n - 1]!.at + times[n - 1]!.durationMs)).toBeLessThanOrEqual(
          MAX_GAP_MS - GAP_MARGIN_MS + 150,
        );
    }
  }, 60_000);
});

describe("a slot holds only its request (attempts claimed ahead)", () => {
  it("with every round trip to the delivery log 400 ms late, a receiver answering in 500 ms gets the 7th request as the 1st is answered, each stamped when it is sent", async () => {
    const app = await seedRunnable(api);
    const { hooks, messages } = await deliveriesTo(app.projectId, 12, [{ status: 200, delayMs: 500 }], PEER_MORE[3]);
    const stub = laneObject(env, laneName(messages[0]!));
    // The object's lane, on a delivery log whose claims and outcome writes each take 400 ms more. The receiver is slower
    // than a claim, so a claim made ahead is ready when the 1st answers (500 ms) and one made after the answer
    // shows as 900 ms or more: 200 ms either side of the bound, which a loaded machine's scheduling (tens of
    // ms) cannot cross.
    await runInDurableObject(stub, (instance: { lane: Lane }, state) => {
      instance.lane = new Lane(state, { ...env, ...slowDeliveryStores(400) }, testDeps());
    });
    expect((await stub.accept(messages)).stored).toEqual(Array(12).fill(true));
    for (const m of messages)
      await until(
        () => deliveryRow(m.id),
        (r) => r?.status === "delivered",
        15_000,
      );
    const arrivals = (await Promise.all(hooks.map((h) => received(h.key)))).map((r) => r[0]!.at);
    const order = [...arrivals].sort((a, b) => a - b);
    // Never more than the lane's concurrency at once: the 7th comes once the 1st is answered (500 ms) ...
    expect(order[LANE_CONCURRENCY]! - order[0]!).toBeGreaterThanOrEqual(500);
    // ... and at once: its claim was made while the first six were out (a claim after the answer: ≥ 900 ms).
    expect(order[LANE_CONCURRENCY]! - order[0]!).toBeLessThan(700);
    // The recorded start is the send, not the claim 400 ms before it.
    for (const [i, m] of messages.entries()) {
      const [first] = await attemptTimes(m.id);
      expect(arrivals[i]! - first!.at, `delivery ${i}: from its recorded start to its arrival`).toBeLessThan(100);
      expect(arrivals[i]! - first!.at).toBeGreaterThanOrEqual(0);
    }
  }, 30_000);
});

describe("a lane holding a slow attempt takes up its other deliveries at their time", () => {
  it("a retry owed (a 404) is started 1 s after, not once the slow attempt lets the alarm end", async () => {
    const app = await seedRunnable(api);
    // A's receiver answers after 1.9 s (attempts time out after 2 s here); B's says 404, then 204.
    const slowHook = await receiver([{ status: 200, delayMs: 1_900 }]);
    const retryingHook = await receiver([{ status: 404 }, { status: 204 }]);
    const [a] = await deliveryMessages(api, app.projectId, slowHook.url, ['{"n":1}']);
    const [b] = await deliveryMessages(api, app.projectId, retryingHook.url, ['{"n":2}']);
    expect((await laneObject(env, laneName(a!)).accept([a!, b!])).stored).toEqual([true, true]);
    const requests = await until(
      () => received(retryingHook.key),
      (r) => r.length >= 2,
      8_000,
    );
    // Its pump counts the rows owed a retry once, and again after a pause: a count left at 0 skips the retry.
    expect(requests[1]!.at - requests[0]!.at).toBeLessThan(1_500);
    expect(requests[1]!.at - requests[0]!.at).toBeGreaterThanOrEqual(RETRY_DELAYS_SECONDS[0] * 1000 - GAP_MARGIN_MS);
    for (const m of [a!, b!])
      await until(
        () => deliveryRow(m.id),
        (r) => r?.status === "delivered",
        8_000,
      );
  }, 20_000);

  it("a delivery interrupted (its outcome not written) is taken up again 1 s after, likewise", async () => {
    const app = await seedRunnable(api);
    // One lane: A's receiver answers after 1.9 s (attempts time out after 2 s here); B's at once, and B's
    // outcome is refused twice (the write's two tries), so B's attempt is interrupted and due again
    // INTERRUPTED_RETRY_MS (1 s) later, while A still holds the alarm.
    const slowHook = await receiver([{ status: 200, delayMs: 1_900 }]);
    const fastHook = await receiver([{ status: 204 }]);
    const [a] = await deliveryMessages(api, app.projectId, slowHook.url, ['{"n":1}']);
    const [b] = await deliveryMessages(api, app.projectId, fastHook.url, ['{"n":2}']);
    expect(laneName(a!)).toBe(laneName(b!));
    let refusals = 0;
    const refusing = faultyDeliveryStores(
      (statement) => statement.startsWith('INSERT INTO "webhook_attempts"') && refusals++ < 2,
    );
    const stub = laneObject(env, laneName(a!));
    await runInDurableObject(stub, (instance: { lane: Lane }, state) => {
      instance.lane = new Lane(state, { ...env, ...refusing }, testDeps());
    });
    expect((await stub.accept([a!, b!])).stored).toEqual([true, true]);
    const requests = await until(
      () => received(fastHook.key),
      (r) => r.length >= 2,
      8_000,
    );
    expect(refusals).toBeGreaterThanOrEqual(2);
    // Its pump had found no first attempt left to claim while both were out: the interruption says look again.
    expect(requests[1]!.at - requests[0]!.at).toBeLessThan(1_500);
    await until(
      () => deliveryRow(b!.id),
      (r) => r?.status === "delivered",
      5_000,
    );
    await until(
      () => deliveryRow(a!.id),
      (r) => r?.status === "delivered",
      8_000,
    );
  }, 20_000);
});

describe("a settled delivery's row is deleted with others, not by a write of its own", () => {
  it("30 deliveries answered at once leave the lane in a few writes, each sent once; a row that comes back (its delete lost in a crash) sends nothing", async () => {
    const app = await seedRunnable(api);
    const { hooks, messages } = await deliveriesTo(app.projectId, 30, [{ status: 200 }], PEER_MORE[3]);
    const stub = laneObject(env, laneName(messages[0]!));
    let recording: ReturnType<typeof recordingStorage> | undefined;
    await runInDurableObject(stub, (instance: { lane: Lane }, state) => {
      recording = recordingStorage(state.storage);
      instance.lane = new Lane(withStorage(state, recording.storage), env, testDeps());
      // One flush for the whole burst, whatever this machine's pace (250 ms by default).
      instance.lane.settledFlushMs = 60_000;
    });
    expect((await stub.accept(messages)).stored).toEqual(Array(30).fill(true));
    for (const m of messages)
      await until(
        () => deliveryRow(m.id),
        (r) => r?.status === "delivered",
        10_000,
      );
    await until(
      () => stub.pending(),
      (p) => p.length === 0,
      3_000,
    );
    // Each write locks the object's output gate until it is confirmed, and every request sent after it waits
    // (3.5 ms an attempt here): one DELETE a delivery made every attempt wait for one.
    // (A delivery's record may read delivered a moment before its lane settles it: a second flush.)
    const deletes = recording!.execs.filter((e) => e.query.startsWith("DELETE FROM lane_deliveries"));
    expect(deletes.length).toBeGreaterThanOrEqual(1);
    expect(deletes.length).toBeLessThanOrEqual(3);
    for (const h of hooks) expect(await received(h.key)).toHaveLength(1);
    // The lane died before a delete was written: the row is there again, and the record says delivered.
    const [again] = messages;
    await runInDurableObject(stub, async (_instance, state) => {
      state.storage.sql.exec(
        "INSERT INTO lane_deliveries (id, message, due_at) VALUES (?, ?, ?)",
        again!.id,
        JSON.stringify(again),
        Date.now(),
      );
      await state.storage.setAlarm(Date.now());
    });
    // Its alarm (or the alarm still lingering) takes it: claimed, found settled, and gone.
    await until(
      () => stub.pending(),
      (p) => p.length === 0,
      5_000,
    );
    expect(await received(hooks[0]!.key)).toHaveLength(1);
    expect((await attemptRows(again!.id)).map((a) => a.attempt)).toEqual([1]);
  }, 30_000);

  it("a delivery accepted again while its settled row waits for its delete is stored (a release after its lane held it)", async () => {
    const app = await seedRunnable(api);
    const { hooks, messages } = await deliveriesTo(app.projectId, 1, [{ status: 200 }], PEER_MORE[3]);
    const message = messages[0]!;
    const stub = laneObject(env, laneName(message));
    await runInDurableObject(stub, (instance: { lane: Lane }) => {
      instance.lane.settledFlushMs = 60_000;
    });
    expect((await stub.accept([message])).stored).toEqual([true]);
    await until(
      () => deliveryRow(message.id),
      (r) => r?.status === "delivered",
      10_000,
    );
    // Settled, its row not deleted yet: a release (receiver-tasks.ts) sends the same id back, and a copy
    // taken for a duplicate would leave a released delivery with no lane.
    await until(
      () => runInDurableObject(stub, (_i, state) => state.storage.sql.exec("SELECT id FROM lane_deliveries").toArray()),
      (rows) => rows.length === 1,
      3_000,
    );
    expect((await stub.accept([message])).stored).toEqual([true]);
    // Here the record says delivered, so its claim settles it: still one request.
    await until(
      () => stub.pending(),
      (p) => p.length === 0,
      5_000,
    );
    expect(await received(hooks[0]!.key)).toHaveLength(1);
  }, 20_000);
});

describe("a lane keeps at most LANE_BYTES_MAX", () => {
  it("past its bound it refuses new deliveries and stores none; its consumer settles them failed (receiver_backlog_full) and acks", async () => {
    const app = await seedRunnable(api);
    const { hooks, messages: all } = await deliveriesTo(app.projectId, 3, [{ status: 200 }], PEER_MORE[3]);
    const [held, ...messages] = all as [DeliveryMessage, ...DeliveryMessage[]];
    const stub = laneObject(env, laneName(held));
    // One delivery it already holds (due in an hour), and its bound lowered to what it takes now.
    await runInDurableObject(stub, (instance: { lane: Lane }, state) => {
      state.storage.sql.exec(
        "INSERT INTO lane_deliveries (id, message, due_at) VALUES (?, ?, ?)",
        held.id,
        JSON.stringify(held),
        Date.now() + 3_600_000,
      );
      instance.lane.bytesMax = state.storage.sql.databaseSize;
    });
    // A copy of the one it holds is a duplicate, not a refusal (it must not be settled failed).
    expect(await stub.accept([held])).toEqual({ stored: [false] });
    expect(await stub.accept(messages)).toEqual({ stored: [false, false], refused: [true, true] });
    await expect(acceptInLane(env, laneName(messages[0]!), messages)).rejects.toThrow(LaneFullError);
    expect((await stub.pending()).map((p) => p.id)).toEqual([held.id]);
    const batch = createMessageBatch(
      QUEUES.webhookDeliveries,
      messages.map((m, i) => ({ id: `full-${i}`, timestamp: new Date(), attempts: 1, body: queueMessageOf(m) })),
    );
    const ctx = createExecutionContext();
    await createWorker(testDeps()).queue(batch, env, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.retryMessages).toEqual([]);
    expect(result.explicitAcks.sort()).toEqual(["full-0", "full-1"]);
    for (const m of messages)
      expect(await deliveryRow(m.id)).toMatchObject({
        status: "failed",
        attempt_count: 0,
        last_error: "receiver_backlog_full",
      });
    for (const h of hooks) expect(await received(h.key)).toEqual([]);
  });
});

describe("a lane stores a delivery once and never makes a fourth attempt", () => {
  const laneOf = (message: DeliveryMessage) => laneObject(env, laneName(message));

  it("a duplicate (passed directly and through the queue) adds no attempt, and the lane forgets a delivery once it is settled", async () => {
    const app = await seedRunnable(api);
    const { hooks, messages } = await deliveriesTo(app.projectId, 1, [{ status: 404 }], PEER_OTHER);
    const message = messages[0]!;
    const lane = laneOf(message);
    expect(await lane.accept([message])).toEqual({ stored: [true] });
    expect(await lane.accept([message, message])).toEqual({ stored: [false, false] });
    await enqueue([message, message]);
    const row = await until(
      () => deliveryRow(message.id),
      (r) => r?.status === "failed",
      10_000,
    );
    expect(row).toMatchObject({ status: "failed", attempt_count: MAX_ATTEMPTS });
    // Copies arriving after the end find the record settled: still 3 requests in all.
    await until(
      () => lane.pending(),
      (p) => p.length === 0,
      3_000,
    );
    expect(await received(hooks[0]!.key)).toHaveLength(MAX_ATTEMPTS);
    expect((await attemptRows(message.id)).map((a) => a.attempt)).toEqual([1, 2, 3]);
  }, 20_000);

  it("a lane that died after claiming attempt 2 resumes at attempt 3, its last", async () => {
    const app = await seedRunnable(api);
    const { hooks, messages } = await deliveriesTo(app.projectId, 1, [{ status: 404 }], PEER_OTHER);
    const message = messages[0]!;
    // Attempts 1 and 2 were claimed (counted before their requests were sent), then the lane was evicted.
    await claimInStore(message, new Date());
    await claimInStore(message, new Date());
    expect(await laneOf(message).accept([message])).toEqual({ stored: [true] });
    const row = await until(
      () => deliveryRow(message.id),
      (r) => r?.status === "failed",
      5_000,
    );
    expect(row).toMatchObject({ status: "failed", attempt_count: MAX_ATTEMPTS, last_status_code: 404 });
    expect(await received(hooks[0]!.key)).toHaveLength(1);
    expect((await attemptRows(message.id)).map((a) => a.attempt)).toEqual([3]);
  }, 10_000);

  it("a delivery its lane does not accept is handed back to the queue (whose retries end in the dead-letter queue)", async () => {
    const app = await seedRunnable(api);
    const { messages } = await deliveriesTo(app.projectId, 1, [{ status: 200 }], PEER_OTHER);
    const unavailable = {
      idFromName: (name: string) => name,
      get: () => ({ accept: () => Promise.reject(new Error("Durable Object overloaded")) }),
    };
    const batch = createMessageBatch(QUEUES.webhookDeliveries, [
      { id: "h-1", timestamp: new Date(), attempts: 1, body: messages[0] },
    ]);
    const ctx = createExecutionContext();
    await createWorker(testDeps()).queue(batch, { ...env, WEBHOOK_LANES: unavailable } as unknown as Env, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks).toEqual([]);
    expect(result.retryMessages).toMatchObject([{ msgId: "h-1" }]);
    expect(await deliveryRow(messages[0]!.id)).toMatchObject({ status: "pending", attempt_count: 0 });
  });
});

describe("a run hands its delivery straight to its lane (the queue is the fallback)", () => {
  const laneOf = (message: Pick<DeliveryMessage, "projectId" | "endpoint">) => laneObject(env, laneName(message));
  const run = async (endpoint: string, overrides: Parameters<typeof callWith>[1] = {}) => {
    const app = await seedRunnable(api);
    const response = await callWith(api, overrides, `${app.runPath}?webhookEndpoint=${encodeURIComponent(endpoint)}`, {
      method: "POST",
      token: app.token,
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });
    expect(response.status).toBe(200);
    return { app, runId: response.headers.get("x-run-id")!, text: await response.text() };
  };

  it("stores it in the lane before the run's work ends, and the lane delivers it without the queue", async () => {
    const hook = await receiver([{ status: 200, delayMs: 1_000 }], undefined, PEER_OTHER);
    const queue = capturingQueue();
    const { app, runId, text } = await run(hook.url, { WEBHOOK_QUEUE: queue.queue });
    // The run's waitUntil is over: the delivery is in the lane's storage (or already being attempted from it).
    const [pending] = await laneOf({ projectId: app.projectId, endpoint: hook.url }).pending();
    expect(pending?.id).toMatch(/^whd_/);
    const requests = await until(
      () => received(hook.key),
      (r) => r.length > 0,
      10_000,
    );
    expect(requests.map((r) => r.body)).toEqual([text]);
    expect(queue.sent).toEqual([]);
    const row = await until(
      () => deliveryRow(pending!.id),
      (r) => r?.status === "delivered",
      5_000,
    );
    expect(row).toMatchObject({ status: "delivered", attempt_count: 1 });
    expect(runId).toMatch(/^run_/);
  }, 20_000);

  it("goes through the real queue and its consumer when the lane cannot be reached from the run", async () => {
    const hook = await receiver([{ status: 200 }], undefined, PEER_OTHER);
    const { text } = await run(hook.url, { WEBHOOK_LANES: unreachableLanes() });
    // The consumer (the real local broker, its own invocation with the real lanes) hands it to the lane.
    const requests = await until(
      () => received(hook.key),
      (r) => r.length > 0,
      10_000,
    );
    expect(requests.map((r) => r.body)).toEqual([text]);
  }, 20_000);
});

async function attemptTimes(id: string) {
  const results = await rowsInDeliveryStores<{ at: number; duration_ms: number }>(
    "SELECT at, duration_ms FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt",
    [id],
    id,
  );
  return results.map((r) => ({ at: r.at, durationMs: r.duration_ms }));
}

describe("a lane's storage from before its columns were renamed", () => {
  it("a lane whose table still has `runs` renames it to `interruptions` in place, keeping its rows", async () => {
    const stub = laneObject(env, "lane-schema-migration");
    await runInDurableObject(stub, (_instance, state) => {
      // A lane from before its storage had a version: no `lane_meta`.
      state.storage.sql.exec("DROP TABLE IF EXISTS lane_deliveries");
      state.storage.sql.exec("DROP TABLE IF EXISTS lane_meta");
      state.storage.sql.exec(
        "CREATE TABLE lane_deliveries (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, message TEXT NOT NULL, due_at INTEGER NOT NULL, paused INTEGER NOT NULL DEFAULT 0, runs INTEGER NOT NULL DEFAULT 0)",
      );
      state.storage.sql.exec(
        "INSERT INTO lane_deliveries (id, message, due_at, runs) VALUES ('whd_old', '{}', 9999999999999, 2)",
      );
      const lane = new Lane(state, env, testDeps());
      expect(lane.pending()).toEqual([{ id: "whd_old", dueAt: 9999999999999, interruptions: 2 }]);
      state.storage.sql.exec("DELETE FROM lane_deliveries");
    });
  });
});
