import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { consume, startAsync } from "../async-runs";
import { client, testDeps } from "../helpers";
import { received, receiver } from "../peers";
import { capturingQueue, seedRunnable } from "../runs";
import { type DeliveryJson, deliveriesOf, drive, receiverPath, runWithWebhook } from "../webhooks";
import { QUEUES } from "../../src/platform/triggers";
import { deliveryLogDb, deliveryLogName, forgetLegacyDeliveries } from "../../src/webhooks/log";
import type { DeliveryMessage } from "../../src/webhooks/message";
import { createWorker } from "../../src/worker";

/**
 * The delivery log in each project's objects (`DELIVERY_LOG_STORE=objects`, this vitest project's
 * binding; webhooks/log.ts): the paths moved so far record in the log of the delivery's shard and
 * nothing in D1. The rest of the suite runs with D1 (`d1`, the default while the move is under way).
 */

const api = client();

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** Rows of D1's delivery log tables: none, whatever the runs. */
const d1Rows = async () =>
  (await env.DB.prepare(
    "SELECT (SELECT count(*) FROM webhook_deliveries) + (SELECT count(*) FROM webhook_attempts) AS n",
  ).first<{ n: number }>())!.n;

/** Delivery `id`'s record and attempts in its project's log. */
async function inLog(projectId: string, id: string) {
  const db = deliveryLogDb(env, deliveryLogName(projectId, id)).$client;
  const record = await db
    .prepare("SELECT status, attempt_count, run_id, resent_from, last_error FROM webhook_deliveries WHERE id = ?")
    .bind(id)
    .first();
  const { results: attempts } = await db
    .prepare("SELECT attempt, status_code, outcome FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt")
    .bind(id)
    .all();
  return { record, attempts };
}

describe("DELIVERY_LOG_STORE=objects: a run's delivery recorded in its project's log, nothing in D1", () => {
  it("a synchronous run's webhook: recorded, attempted, delivered and listed from its log; resent into the same log", async () => {
    const before = await d1Rows();
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 404 }, { status: 200 }, { status: 200 }]);
    const run = await runWithWebhook(api, app, hook.url);
    expect(run.response.status).toBe(200);
    const message = run.messages[0] as DeliveryMessage;
    expect((await inLog(app.projectId, message.id)).record).toMatchObject({ status: "pending", attempt_count: 0 });

    const driven = await drive(api, message);
    expect(driven.acked).toBe(true);
    expect(await inLog(app.projectId, message.id)).toEqual({
      record: { status: "delivered", attempt_count: 2, run_id: message.runId, resent_from: null, last_error: null },
      attempts: [
        { attempt: 1, status_code: 404, outcome: "retry" },
        { attempt: 2, status_code: 200, outcome: "delivered" },
      ],
    });
    expect(await received(hook.key)).toHaveLength(2);

    // The list, by run and by project (its 8 logs merged), says the same.
    const [listed] = await deliveriesOf(api, app.projectId, message.runId);
    expect(listed).toMatchObject({
      delivery_id: message.id,
      status: "delivered",
      attempts: [{ attempt: 1 }, { attempt: 2 }],
    });
    const all = await api.json<{ data: DeliveryJson[] }>(`/v2/projects/${app.projectId}/webhook-deliveries`, {
      token: app.token,
    });
    expect(all.body.data.map((d) => d.delivery_id)).toEqual([message.id]);

    // A resend: a record of its own in the same log (its run's shard), delivered.
    const sent: unknown[] = [];
    const local = client({ now: api.clock.now }, capturingQueue(sent).bindings);
    const resent = await local.json<DeliveryJson>(
      `/v2/projects/${app.projectId}/webhook-deliveries/${message.id}/resend`,
      { method: "POST", token: app.token },
    );
    expect(resent.status).toBe(201);
    expect(resent.body).toMatchObject({ resent_from: message.id, request_id: message.id, status: "pending" });
    await drive(api, sent[0]);
    expect((await inLog(app.projectId, resent.body.delivery_id)).record).toMatchObject({
      status: "delivered",
      resent_from: message.id,
    });
    expect(await received(hook.key)).toHaveLength(3);
    const page = await api.json<{ data: DeliveryJson[]; next_cursor: string | null }>(
      `/v2/projects/${app.projectId}/webhook-deliveries?limit=1`,
      { token: app.token },
    );
    expect(page.body.data.map((d) => d.delivery_id)).toEqual([resent.body.delivery_id]);
    const next = await api.json<{ data: DeliveryJson[]; next_cursor: string | null }>(
      `/v2/projects/${app.projectId}/webhook-deliveries?limit=1&cursor=${page.body.next_cursor}`,
      { token: app.token },
    );
    expect(next.body.data.map((d) => d.delivery_id)).toEqual([message.id]);
    expect(next.body.next_cursor).toBeNull();

    // The run's record in usage shows its delivery, read from the log.
    const record = await api.json<{ webhook: { delivery_id: string; status: string; attempts: number } | null }>(
      `/v2/projects/${app.projectId}/runs/${message.runId}`,
      { token: app.token },
    );
    expect(record.body.webhook).toEqual({ delivery_id: message.id, status: "delivered", attempts: 2 });
    expect(await d1Rows()).toBe(before);
  });

  it("an async run's webhook: its keeper's end records the delivery in the run's log; delivered from there", async () => {
    const before = await d1Rows();
    const app = await seedRunnable(api);
    const hook = await receiver();
    const started = await startAsync(api, app, { query: `webhookEndpoint=${encodeURIComponent(hook.url)}` });
    const consumed = await consume(api, started.message);
    expect(consumed.deliveries).toHaveLength(1);
    const message = consumed.deliveries[0] as DeliveryMessage;
    expect(deliveryLogName(app.projectId, message.id)).toBe(deliveryLogName(app.projectId, started.body.run_id));
    await drive(api, message);
    expect((await inLog(app.projectId, message.id)).record).toMatchObject({ status: "delivered", attempt_count: 1 });
    expect(await received(hook.key)).toHaveLength(1);
    expect(await d1Rows()).toBe(before);
  });

  it("a dead-lettered delivery is settled failed in its log", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const run = await runWithWebhook(api, app, hook.url);
    const message = run.messages[0] as DeliveryMessage;
    const batch = createMessageBatch(QUEUES.webhookDeadLetters, [
      { id: "dl-1", timestamp: new Date(), attempts: 1, body: message },
    ]);
    const ctx = createExecutionContext();
    await createWorker(testDeps({ now: api.clock.now })).queue(batch, env, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["dl-1"]);
    expect((await inLog(app.projectId, message.id)).record).toMatchObject({ status: "failed" });
    expect(await received(hook.key)).toHaveLength(0);
  });

  it("a receiver is known to its project by a delivery in its logs: pause answers for it, 404 for an origin none went to", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const run = await runWithWebhook(api, app, hook.url);
    await drive(api, run.messages[0]);
    const origin = new URL(hook.url).origin;
    const paused = await api.json(receiverPath(app, origin, "/pause"), { method: "POST", token: app.token });
    expect(paused.status).toBe(200);
    const unknown = await api.json(receiverPath(app, "https://never.example", "/pause"), {
      method: "POST",
      token: app.token,
    });
    expect(unknown.status).toBe(404);
  });

  it("a delivery D1 recorded before the switch and holds pending is attempted and settled in D1, not begun again in its log", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const at = api.clock.now().getTime();
    const id = "whd_01m7zzzzzzzzzzzzzzzzzzzzzzzz0";
    const runId = "run_01m7zzzzzzzzzzzzzzzzzzzzzzzz0";
    // As the code before wrote it: its `pending` record in D1, its message on its way.
    await env.DB.prepare(
      `INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count,
         created_at, updated_at, message_id) VALUES (?, ?, ?, ?, 0, 9, 'pending', 0, ?, ?, ?)`,
    )
      .bind(id, app.projectId, runId, hook.url, at, at, id)
      .run();
    forgetLegacyDeliveries();
    const message: DeliveryMessage = {
      v: 1,
      id,
      messageId: id,
      projectId: app.projectId,
      runId,
      endpoint: hook.url,
      createdAt: at,
      bodyBytes: 9,
      body: { inline: '{"old":1}' },
      secret: null,
    };
    expect((await drive(api, message)).acked).toBe(true);
    expect(
      await env.DB.prepare("SELECT status, attempt_count FROM webhook_deliveries WHERE id = ?").bind(id).first(),
    ).toEqual({ status: "delivered", attempt_count: 1 });
    expect((await inLog(app.projectId, id)).record).toBeNull();
    expect((await received(hook.key)).map((r) => r.body)).toEqual(['{"old":1}']);
    // Listed once, D1's record.
    const [listed] = await deliveriesOf(api, app.projectId, runId);
    expect(listed).toMatchObject({ delivery_id: id, status: "delivered", attempts: [{ attempt: 1 }] });
    await env.DB.prepare("DELETE FROM webhook_attempts WHERE delivery_id = ?").bind(id).run();
    await env.DB.prepare("DELETE FROM webhook_deliveries WHERE id = ?").bind(id).run();
    forgetLegacyDeliveries();
  });
});
