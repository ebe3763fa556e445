import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { deliveryMessages, deliveryRow, until } from "../../test/deliveries";
import { client, fakeClock, testDeps } from "../../test/helpers";
import { PEER, PEER_MORE, PEER_OTHER, received, receiver } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import { followTask, receiverPath } from "../../test/webhooks";
import { Lane } from "./lane";
import { LANE_CONCURRENCY } from "./lane-capacity";
import { shardOf } from "./lane-plan";
import { type DeliveryMessage, laneName, laneObject, laneShardName } from "./message";
import { RECEIVER_STATE_TTL_MS } from "./receiver-controls";
import type { ReceiverTaskJson } from "./receiver-routes";
import { receiverTaskObject } from "./receiver-tasks";
import { firstInDeliveryStores } from "../../test/delivery-stores";

/**
 * A receiver's state reaches its lanes when it changes (receiver-settings.ts `tellLanes`, lane.ts
 * `configure`), not when their copies age: a pause holds the next delivery on the lane and on each of
 * its shards though they had read the receiver active just before; a resume lets the next one through at
 * once and its release need not wait; a stop a lane hears is told to the other lanes of its receiver. A
 * change whose push is lost still takes effect once the lane's copy is RECEIVER_STATE_TTL_MS old (the
 * backstop, on the lane's clock moved by hand), and the release after such a resume waits for that.
 * Real lanes, task objects and receivers (test/global/peers.mjs).
 */

const api = client();

/** A WEBHOOK_LANES binding whose lanes cannot be told anything: every push is lost on its way. */
const untellable = {
  idFromName: (name: string) => name,
  get: () => ({ configure: () => Promise.reject(new Error("Durable Object reset because its code was updated.")) }),
} as unknown as Env["WEBHOOK_LANES"];
/** The same API, whose pushes to the lanes fail. */
const deaf = client({}, { WEBHOOK_LANES: untellable });

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

interface World {
  app: Awaited<ReturnType<typeof seedRunnable>>;
  hook: { url: string; key: string };
  origin: string;
}

/**
 * A new project and a receiver of it at `at` that answers 200; with `concurrency`, set through the API
 * (the receiver is then known to the project before any delivery).
 */
async function worldAt(at: string, concurrency?: number): Promise<World> {
  const app = await seedRunnable(api);
  const hook = await receiver([{ status: 200 }], undefined, at);
  const origin = new URL(hook.url).origin;
  if (concurrency !== undefined) {
    const patch = await api.json(receiverPath(app, origin), {
      method: "PATCH",
      token: app.token,
      body: { concurrency },
    });
    expect(patch.status).toBe(200);
  }
  return { app, hook, origin };
}

const control = (via: typeof api, { app, origin }: World, action: "pause" | "resume") =>
  via.json<{ state?: string; receiver?: { state: string }; task?: ReceiverTaskJson }>(
    receiverPath(app, origin, `/${action}`),
    { method: "POST", token: app.token },
  );

let batches = 0;

/** `count` deliveries to the receiver (their records written as the run path writes them), handed to its lane. */
async function deliver({ app, hook }: World, count: number): Promise<DeliveryMessage[]> {
  const tag = batches++;
  const messages = await deliveryMessages(
    api,
    app.projectId,
    hook.url,
    Array.from({ length: count }, (_, i) => JSON.stringify({ batch: tag, n: i })),
  );
  expect(await laneObject(env, laneName(messages[0]!)).accept(messages)).toEqual({ stored: messages.map(() => true) });
  return messages;
}

/** Each delivery's status, attempts and last error once none is pending any more. */
async function settled(messages: DeliveryMessage[]) {
  const rows = await until(
    () => Promise.all(messages.map((m) => deliveryRow(m.id))),
    (r) => r.every((row) => row !== null && row.status !== "pending"),
    15_000,
  );
  return rows.map((r) => [r!.status, r!.attempt_count, r!.last_error]);
}

const DELIVERED = ["delivered", 1, null];
const HELD_PAUSED = ["held", 0, "receiver_paused"];

/** The lanes of a receiver whose concurrency is twice one object's share: its first lane and shard 1. */
const SHARDED = 2 * LANE_CONCURRENCY;
const laneOf = (m: DeliveryMessage) => shardOf(m.id, 2);

/** 12 deliveries, some on each of the receiver's two lanes: each lane takes (and so reads) the receiver's state. */
async function deliverOnBothLanes(world: World, expected: unknown[]) {
  const messages = await deliver(world, 12);
  expect(new Set(messages.map(laneOf))).toEqual(new Set([0, 1]));
  expect(await settled(messages)).toEqual(Array(12).fill(expected));
  return messages;
}

describe("a pause is pushed to the receiver's lanes", () => {
  it("the next delivery is held at once, though the lane read the receiver active just before", async () => {
    const world = await worldAt(PEER_MORE[0]!);
    // The lane reads the receiver's state for this delivery: active, trusted for RECEIVER_STATE_TTL_MS.
    expect(await settled(await deliver(world, 1))).toEqual([DELIVERED]);

    expect((await control(api, world, "pause")).body).toMatchObject({ state: "paused" });
    expect(await settled(await deliver(world, 3))).toEqual(Array(3).fill(HELD_PAUSED));
    expect(await received(world.hook.key)).toHaveLength(1);
  }, 30_000);

  it("so is each shard of a lane whose concurrency is above one object's share", async () => {
    const world = await worldAt(PEER_OTHER, SHARDED);
    await deliverOnBothLanes(world, DELIVERED);

    expect((await control(api, world, "pause")).body).toMatchObject({ state: "paused" });
    await deliverOnBothLanes(world, HELD_PAUSED);
    expect(await received(world.hook.key)).toHaveLength(12);
  }, 30_000);
});

describe("a resume is pushed to the receiver's lanes", () => {
  it("the next delivery goes at once though the lane held the one before, and the release sends what was held", async () => {
    const world = await worldAt(PEER_MORE[1]!, LANE_CONCURRENCY);
    expect((await control(api, world, "pause")).body).toMatchObject({ state: "paused" });
    // Held on the state the lane knows (it had read none before): paused.
    expect(await settled(await deliver(world, 3))).toEqual(Array(3).fill(HELD_PAUSED));

    const resumed = await control(api, world, "resume");
    expect(resumed.body.receiver).toMatchObject({ state: "active" });
    const [next] = await deliver(world, 1);
    expect(await settled([next!])).toEqual([DELIVERED]);
    // Delivered as itself, not held and then released by the task.
    const row = await firstInDeliveryStores(
      "SELECT task_id FROM webhook_deliveries WHERE id = ?",
      [next!.id],
      next!.id,
    );
    expect(row).toEqual({ task_id: null });

    const task = await followTask(api, world.app, world.origin, resumed.body.task!.task_id, 15_000);
    expect(task).toMatchObject({ status: "finished", sent: 3, delivered: 3 });
    expect(await received(world.hook.key)).toHaveLength(4);
  }, 30_000);
});

describe("a stop a lane hears is pushed to the other lanes of its receiver", () => {
  it("a receiver that answered 410 on one lane of its two gets nothing more from the other, which had read it active", async () => {
    const world = await worldAt(PEER_MORE[2]!, SHARDED);
    await deliverOnBothLanes(world, DELIVERED);

    // It says stop to the next delivery, on whichever lane of the receiver takes it.
    await fetch(`${PEER}/scenarios/${world.hook.key}`, {
      method: "POST",
      body: JSON.stringify({ responses: [{ status: 410 }] }),
    });
    const [stop] = await deliver(world, 1);
    expect((await settled([stop!]))[0]!.slice(0, 2)).toEqual(["failed", 1]);
    // A lane lets a delivery go once what follows its attempt is done: the disable, told to the lanes.
    const heard = laneObject(env, laneShardName(laneName(stop!), laneOf(stop!)));
    expect(
      await until(
        () => heard.pending(),
        (p) => p.length === 0,
        5_000,
      ),
    ).toEqual([]);

    await deliverOnBothLanes(world, ["held", 0, "receiver_disabled"]);
    expect(await received(world.hook.key)).toHaveLength(1);
  }, 30_000);
});

describe("a push that fails", () => {
  it("a pause still holds once the lane's copy of the state is RECEIVER_STATE_TTL_MS old (on the lane's clock)", async () => {
    const world = await worldAt(PEER);
    const clock = fakeClock();
    const [first] = await deliveryMessages(api, world.app.projectId, world.hook.url, ["{}"]);
    const lane = laneObject(env, laneName(first!));
    await runInDurableObject(lane, (instance: { lane: Lane }, state) => {
      instance.lane = new Lane(state, env, testDeps({ now: clock.now }));
    });
    await lane.accept([first!]);
    expect(await settled([first!])).toEqual([DELIVERED]);

    // Paused on record in D1; the lane was not told.
    const paused = await control(deaf, world, "pause");
    expect([paused.status, paused.body.state]).toEqual([200, "paused"]);
    // The worst case of a lost push: the lane trusts the state it read until its copy is old.
    expect(await settled(await deliver(world, 1))).toEqual([DELIVERED]);
    clock.advance(RECEIVER_STATE_TTL_MS);
    expect(await settled(await deliver(world, 2))).toEqual(Array(2).fill(HELD_PAUSED));
    expect(await received(world.hook.key)).toHaveLength(2);
  }, 30_000);

  it("a release after a resume whose push failed waits until no lane can still trust the paused state", async () => {
    const world = await worldAt(PEER_MORE[0]!, LANE_CONCURRENCY);
    expect((await control(api, world, "pause")).body).toMatchObject({ state: "paused" });
    const [held] = await deliver(world, 1);
    expect(await settled([held!])).toEqual([HELD_PAUSED]);

    const startedAt = Date.now();
    const resumed = await control(deaf, world, "resume");
    expect(resumed.body.receiver).toMatchObject({ state: "active" });
    const taskId = resumed.body.task!.task_id;
    // The task's first slice finds the lanes maybe unaware of the resume, and sets its next alarm past
    // the time any copy of the paused state they read may be trusted until.
    const alarm = await until(
      () => runInDurableObject(receiverTaskObject(env, taskId), (_instance, state) => state.storage.getAlarm()),
      (at) => at !== null && at >= startedAt + RECEIVER_STATE_TTL_MS,
      5_000,
    );
    expect(alarm).toBeGreaterThanOrEqual(startedAt + RECEIVER_STATE_TTL_MS);
    expect(await deliveryRow(held!.id)).toMatchObject({ status: "held" });
    const cancelled = await api.json(receiverPath(world.app, world.origin, `/tasks/${taskId}`), {
      method: "DELETE",
      token: world.app.token,
    });
    expect(cancelled.status).toBe(200);
  }, 30_000);
});
