import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { until } from "../deliveries";
import { projectDeliveries } from "../delivery-stores";
import { client, seedProject, testDeps } from "../helpers";
import { PEER, PEER_MORE, received, receiver } from "../peers";
import { seedRunnable } from "../runs";
import { followTask, receiverPath, runToLane } from "../webhooks";
import { createScope } from "../../src/platform/scope";
import { idInShardOf, shardOf } from "../../src/platform/shards";
import { deliveryLogDb, deliveryLogOfShard } from "../../src/webhooks/log";
import type { DeliveryMessage } from "../../src/webhooks/message";
import type { ReceiverTaskJson } from "../../src/webhooks/receiver-routes";
import { createTask, runSlice, taskProgress } from "../../src/webhooks/receiver-tasks";

/**
 * A receiver's tasks with the delivery log in its project's objects (`DELIVERY_LOG_STORE=objects`):
 * a recovery finds the failed deliveries in the project's logs and writes each resend into its
 * original's log; a release finds the held ones there. On the real lanes and task objects, and a real
 * receiver (test/global/peers.mjs); D1 keeps the tasks' rows and no delivery.
 */

const api = client();
const SECRET = "receiver-tasks-objects-secret";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
  vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

type App = Awaited<ReturnType<typeof seedRunnable>>;

/** A run of `app` with its webhook to `endpoint`, its delivery handed to the real lane. */
const runWith = (app: App, endpoint: string, n: number) => runToLane(api, app, endpoint, SECRET, n);

/** The project's deliveries in its 8 logs, oldest first, each with the shard of the log that holds it. */
const inLogs = async (app: App) => (await projectDeliveries(app.projectId)).filter((row) => row.shard !== null);

/** The project's deliveries in D1: none, whatever the tasks do. */
const inD1 = async (app: App) =>
  (await env.DB.prepare("SELECT count(*) AS n FROM webhook_deliveries WHERE project_id = ?")
    .bind(app.projectId)
    .first<{ n: number }>())!.n;

const firstArrivals = (got: { headers: Record<string, string> }[]) => [
  ...new Set(got.map((r) => r.headers["x-request-id"]!)),
];

describe("DELIVERY_LOG_STORE=objects: a receiver's tasks read and write the project's logs", () => {
  it("recover: each failed delivery resent once, into its original's log, and delivered; a second recover sends nothing", async () => {
    const app = await seedRunnable(api);
    // A receiver answering 500: a final failure at the first attempt.
    const hook = await receiver([{ status: 500 }], SECRET, PEER_MORE[0]);
    const origin = new URL(hook.url).origin;
    const since = api.clock.now().toISOString();
    const N = 6;
    for (let i = 0; i < N; i++) {
      await runWith(app, hook.url, i);
      api.clock.advance(3_000);
    }
    const failed = await until(
      () => inLogs(app),
      (rows) => rows.length === N && rows.every((r) => r.status === "failed"),
      20_000,
    );
    expect(failed.map((r) => [r.status, r.attempt_count])).toEqual(Array(N).fill(["failed", 1]));
    // Runs spread over the shards: the recovery has more than one log to read.
    expect(new Set(failed.map((r) => r.shard)).size).toBeGreaterThan(1);
    expect(await inD1(app)).toBe(0);

    // The receiver is back.
    await fetch(`${PEER}/scenarios/${hook.key}`, {
      method: "POST",
      body: JSON.stringify({ responses: [{ status: 200 }], secret: SECRET }),
    });

    const dry = await api.json<ReceiverTaskJson>(receiverPath(app, origin, "/recover"), {
      method: "POST",
      token: app.token,
      body: { since, dry_run: true },
    });
    expect(dry.status).toBe(202);
    expect(await followTask(api, app, origin, dry.body.task_id)).toMatchObject({
      status: "finished",
      counted: N,
      sent: 0,
    });

    const recover = await api.json<ReceiverTaskJson>(receiverPath(app, origin, "/recover"), {
      method: "POST",
      token: app.token,
      body: { since, until: api.clock.now().toISOString() },
    });
    expect(recover.status).toBe(202);
    const done = await followTask(api, app, origin, recover.body.task_id);
    expect(done).toMatchObject({ status: "finished", counted: N, sent: N, delivered: N, failed: 0, pending: 0 });

    const rows = await inLogs(app);
    const resends = rows.filter((r) => r.task_id === recover.body.task_id);
    expect(resends).toHaveLength(N);
    // Each failed delivery once: a record of its own, in the same log as its original, with its message id.
    expect(resends.map((r) => r.resent_from).sort()).toEqual(failed.map((r) => r.id).sort());
    for (const resend of resends) {
      const original = failed.find((r) => r.id === resend.resent_from)!;
      expect(resend).toMatchObject({
        status: "delivered",
        message_id: original.message_id,
        run_id: original.run_id,
        shard: original.shard,
      });
      expect(shardOf(resend.id)).toBe(original.shard);
    }
    // The originals stay failed; the receiver got each message once more, signed afresh.
    expect(rows.filter((r) => r.task_id === null).map((r) => r.status)).toEqual(Array(N).fill("failed"));
    const got = await received(hook.key);
    expect(firstArrivals(got).sort()).toEqual(failed.map((r) => r.message_id).sort());
    expect(got.every((r) => r.signatures?.node && r.signatures.standard)).toBe(true);

    // A second recovery of the window finds every message delivered since: nothing counted, nothing sent.
    const again = await api.json<ReceiverTaskJson>(receiverPath(app, origin, "/recover"), {
      method: "POST",
      token: app.token,
      body: { since },
    });
    expect(await followTask(api, app, origin, again.body.task_id)).toMatchObject({
      status: "finished",
      counted: 0,
      sent: 0,
    });
    expect(await received(hook.key)).toHaveLength(got.length);
    expect(await inLogs(app)).toHaveLength(2 * N);
    expect(await inD1(app)).toBe(0);
  }, 60_000);

  it("pause, runs held in their logs, resume: the release hands each on as itself, delivered", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }], SECRET, PEER_MORE[1]);
    const origin = new URL(hook.url).origin;
    // A receiver is known to its project by a delivery: one first, delivered.
    await runWith(app, hook.url, 0);
    api.clock.advance(1_000);
    const [first] = await until(
      () => inLogs(app),
      (rows) => rows[0]?.status === "delivered",
      15_000,
    );
    const paused = await api.json(receiverPath(app, origin, "/pause"), { method: "POST", token: app.token });
    expect(paused.status).toBe(200);
    const N = 5;
    for (let i = 1; i <= N; i++) {
      await runWith(app, hook.url, i);
      api.clock.advance(1_000);
    }
    const held = (
      await until(
        () => inLogs(app),
        (rows) => rows.filter((r) => r.status === "held").length === N,
        15_000,
      )
    ).slice(1);
    expect(held.map((r) => [r.status, r.attempt_count, r.last_error])).toEqual(
      Array(N).fill(["held", 0, "receiver_paused"]),
    );
    expect(new Set(held.map((r) => r.shard)).size).toBeGreaterThan(1);
    expect(firstArrivals(await received(hook.key))).toEqual([first!.message_id]);

    const resumed = await api.json<{ receiver: { state: string }; task: ReceiverTaskJson }>(
      receiverPath(app, origin, "/resume"),
      { method: "POST", token: app.token },
    );
    expect(resumed.status).toBe(200);
    expect(resumed.body.task).toMatchObject({ kind: "release", status: "sending" });
    const done = await followTask(api, app, origin, resumed.body.task.task_id);
    expect(done).toMatchObject({ status: "finished", sent: N, delivered: N, failed: 0, pending: 0 });
    // Each held delivery sent as itself (no resend record), where it was recorded.
    const rows = (await inLogs(app)).slice(1);
    expect(rows.map((r) => [r.id, r.shard, r.status, r.resent_from, r.task_id])).toEqual(
      held.map((r) => [r.id, r.shard, "delivered", null, resumed.body.task.task_id]),
    );
    expect(
      firstArrivals(await received(hook.key))
        .slice(1)
        .sort(),
    ).toEqual(held.map((r) => r.message_id).sort());
    expect(await inD1(app)).toBe(0);
  }, 60_000);

  it("recover over the logs and D1 (recorded before them): a D1 delivery whose message its log delivered since is not sent again", async () => {
    const { projectId } = await seedProject(api);
    const origin = "https://hooks.before-the-logs.example";
    const base = api.clock.now().getTime() - 60_000;
    const columns = `(id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count, created_at,
      updated_at, body, resent_from, message_id)`;
    // D1 kept two failed deliveries from before the logs; one was resent since, into its run's log, and delivered.
    await env.DB.batch(
      ["a", "b"].map((k, i) =>
        env.DB.prepare(
          `INSERT INTO webhook_deliveries ${columns} VALUES (?1, ?2, ?3, ?4, 0, 9, 'failed', 1, ?5, ?5, '{}', NULL, ?1)`,
        ).bind(`whd_d1${k}`, projectId, `run_d1${k}`, `${origin}/hook`, base + i),
      ),
    );
    const resendOfA = idInShardOf("whd_resentsincea", "run_d1a");
    await deliveryLogDb(env, deliveryLogOfShard(projectId, shardOf("run_d1a")))
      .$client.prepare(
        `INSERT INTO webhook_deliveries ${columns} VALUES (?1, ?2, 'run_d1a', ?3, 0, 9, 'delivered', 1, ?4, ?4, '{}', 'whd_d1a', 'whd_d1a')`,
      )
      .bind(resendOfA, projectId, `${origin}/hook`, base + 10)
      .run();
    // And one failed in a log since.
    const inLog = idInShardOf("whd_inloga", "run_logc");
    await deliveryLogDb(env, deliveryLogOfShard(projectId, shardOf("run_logc")))
      .$client.prepare(
        `INSERT INTO webhook_deliveries ${columns} VALUES (?1, ?2, 'run_logc', ?3, 0, 9, 'failed', 1, ?4, ?4, '{}', NULL, ?1)`,
      )
      .bind(inLog, projectId, `${origin}/hook`, base + 20)
      .run();

    const deps = testDeps({ now: api.clock.now });
    const scope = createScope(env, createExecutionContext(), deps);
    const task = await createTask(scope, {
      projectId,
      origin,
      kind: "recover",
      dryRun: false,
      since: new Date(base - 1),
      until: api.clock.now(),
      createdBy: "test",
    });
    const handed: DeliveryMessage[] = [];
    const handTo = async (messages: DeliveryMessage[]) => {
      handed.push(...messages);
    };
    for (let slices = 0; ; slices++) {
      const next = await runSlice(createScope(env, createExecutionContext(), deps), task.id, { handTo });
      if (next === null || slices > 20) break;
      if (next > 0) {
        // The lane settled what it was handed: each resend delivered in its log.
        for (const m of handed)
          await deliveryLogDb(env, deliveryLogOfShard(projectId, shardOf(m.id)))
            .$client.prepare("UPDATE webhook_deliveries SET status = 'delivered', attempt_count = 1 WHERE id = ?")
            .bind(m.id)
            .run();
      }
    }
    // Sent: D1's "b" and the log's own; not "a", delivered since in its log. Oldest first, each once.
    expect(handed.map((m) => m.messageId)).toEqual(["whd_d1b", inLog]);
    for (const m of handed) expect(shardOf(m.id)).toBe(shardOf(m.runId));
    const [row] = (
      await env.DB.prepare("SELECT status, counted, sent FROM webhook_receiver_tasks WHERE id = ?").bind(task.id).all()
    ).results;
    expect(row).toEqual({ status: "finished", counted: 2, sent: 2 });
    expect(await taskProgress(scope, task.id, projectId)).toEqual({ delivered: 2, failed: 0, pending: 0 });
    // D1 holds its two and nothing more: the resends are in the logs.
    expect(
      (await env.DB.prepare("SELECT count(*) AS n FROM webhook_deliveries WHERE project_id = ?")
        .bind(projectId)
        .first<{ n: number }>())!.n,
    ).toBe(2);
  });
});
