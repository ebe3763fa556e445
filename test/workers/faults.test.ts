import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { DeliveryMessage } from "../../src/webhooks/message";
import { client } from "../helpers";
import { received, receiver } from "../peers";
import { callWith, capturingQueue, seedRunnable, unreachableLanes } from "../runs";
import { deliveriesOf, drive } from "../webhooks";
import { faultyD1 } from "../faulty-d1";
import { faultyDeliveryStores } from "../delivery-stores";

/**
 * D1 failing under the gateway (test/faulty-d1.ts) on the statements a test chooses. Each failure must
 * give a clear problem (never a 500 with a stack) or be retried, and never leave a write half done or lost.
 */
const api = client();

/** What the gateway logged as errors during the test (failures log by design). */
let errorLines: string[] = [];

beforeEach(() => {
  errorLines = [];
  vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
    errorLines.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  });
});
afterEach(() => {
  vi.restoreAllMocks();
});

async function expectStorageProblem(response: Response) {
  const text = await response.text();
  expect(response.status, text).toBe(503);
  expect(response.headers.get("content-type")).toBe("application/problem+json");
  expect(response.headers.get("retry-after")).toBe("1");
  const body = JSON.parse(text) as Record<string, unknown>;
  expect(body).toMatchObject({ code: "service_unavailable", request_id: expect.stringMatching(/^req_/) });
  // Nothing of the failure's insides reaches the caller.
  expect(text).not.toMatch(/D1_ERROR|Network connection|at .*\.(js|ts)|stack|Failed query/i);
}

describe("D1 errors (injected)", () => {
  it("a management write whose insert fails answers 503 with Retry-After, writes nothing, and the retry succeeds", async () => {
    const seed = await seedRunnable(api);
    const broken = faultyD1(env.DB, (sql) => /^insert into "apps"/i.test(sql));
    const body = JSON.stringify({ name: "faulty-app", region: "us-east-1", runtime: "cortex" });
    const init = { method: "POST", token: seed.token, headers: { "Content-Type": "application/json" }, body };
    await expectStorageProblem(await callWith(api, { DB: broken }, `/v2/projects/${seed.projectId}/apps`, init));
    const list = await api.json<{ data: { name: string }[] }>(`/v2/projects/${seed.projectId}/apps`, {
      token: seed.token,
    });
    expect(list.body.data.map((a) => a.name)).not.toContain("faulty-app");
    const retried = await callWith(api, {}, `/v2/projects/${seed.projectId}/apps`, init);
    expect(retried.status).toBe(201);
    // The operator still learns what happened, by request id, in the log.
    expect(errorLines.some((line) => line.includes("storage unavailable"))).toBe(true);
  });

  it("a read that fails answers 503 too, on every kind of statement", async () => {
    const seed = await seedRunnable(api);
    const broken = faultyD1(env.DB, () => true);
    for (const path of [
      `/v2/projects/${seed.projectId}`,
      `/v2/projects/${seed.projectId}/apps`,
      `/v2/projects/${seed.projectId}/webhook-deliveries`,
    ]) {
      await expectStorageProblem(await callWith(api, { DB: broken }, path, { token: seed.token }));
    }
  });

  it("a cancel whose update fails leaves the build as it was; the retry cancels it", async () => {
    const seed = await seedRunnable(api);
    const build = await api.json<{ build_id: string }>(`/v2/projects/${seed.projectId}/apps/${seed.appId}/builds`, {
      method: "POST",
      token: seed.token,
    });
    const path = `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${build.body.build_id}`;
    const broken = faultyD1(env.DB, (sql) => /^update "builds"/i.test(sql));
    await expectStorageProblem(await callWith(api, { DB: broken }, path, { method: "DELETE", token: seed.token }));
    expect((await api.json(path, { token: seed.token })).body.status).toBe("queued");
    expect((await api.json(path, { method: "DELETE", token: seed.token })).body.status).toBe("cancelled");
  });

  it("a run whose key lookup fails answers 503 and never calls the upstream", async () => {
    let upstreamCalls = 0;
    const counted = client({ outbound: { fetch: (r) => (upstreamCalls++, fetch(r)) } });
    const app = await seedRunnable(counted);
    const broken = faultyD1(env.DB, (sql) => /from "service_accounts"/i.test(sql));
    await expectStorageProblem(
      await callWith(counted, { DB: broken }, app.runPath, {
        method: "POST",
        token: app.token,
        headers: { "Content-Type": "application/json" },
        body: "{}",
      }),
    );
    expect(upstreamCalls).toBe(0);
  });

  it("a delivery whose record cannot be written at enqueue is still recorded, by the consumer, and delivered", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }]);
    const capture = capturingQueue();
    const broken = faultyDeliveryStores((sql) => /^insert into "webhook_deliveries"/i.test(sql));
    const response = await callWith(
      api,
      { ...broken, ...capture.bindings },
      `${app.runPath}?webhookEndpoint=${encodeURIComponent(hook.url)}`,
      {
        method: "POST",
        token: app.token,
        headers: { "Content-Type": "application/json" },
        body: "{}",
      },
    );
    // The caller's answer does not depend on the bookkeeping.
    expect(response.status).toBe(200);
    const runId = response.headers.get("x-run-id")!;
    expect(await deliveriesOf(api, app.projectId, runId)).toEqual([]);
    expect(capture.sent).toHaveLength(1);
    await drive(api, capture.sent[0]);
    const [delivery] = await deliveriesOf(api, app.projectId, runId);
    expect(delivery).toMatchObject({ status: "delivered", attempts: [{ attempt: 1, status_code: 200 }] });
  });

  it("an attempt whose outcome cannot be written is written again, and the delivery never stays pending", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }]);
    const capture = capturingQueue();
    await callWith(api, { ...capture.bindings }, `${app.runPath}?webhookEndpoint=${encodeURIComponent(hook.url)}`, {
      method: "POST",
      token: app.token,
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });
    const message = capture.sent[0] as DeliveryMessage;

    // One failed write of the outcome: tried again within the same attempt, delivered once.
    let failures = 1;
    const flaky = faultyDeliveryStores((sql) => /^insert into "webhook_attempts"/i.test(sql) && failures-- > 0);
    const first = await drive(api, message, flaky);
    expect(first).toMatchObject({ attempts: 1, acked: true });
    const [delivered] = await deliveriesOf(api, app.projectId, message.runId);
    expect(delivered).toMatchObject({ status: "delivered" });
    expect(await received(hook.key)).toHaveLength(1);
  });

  it("an outcome that stays unwritable sends the message back to the queue; the next attempt records it", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }]);
    const capture = capturingQueue();
    await callWith(api, { ...capture.bindings }, `${app.runPath}?webhookEndpoint=${encodeURIComponent(hook.url)}`, {
      method: "POST",
      token: app.token,
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });
    const message = capture.sent[0] as DeliveryMessage;

    let failures = 2; // both writes of attempt 1's outcome
    const flaky = faultyDeliveryStores((sql) => /^insert into "webhook_attempts"/i.test(sql) && failures-- > 0);
    const first = await drive(api, message, flaky);
    expect(first).toMatchObject({ attempts: 1, acked: false, retried: true });
    // The lane runs it again: it claims attempt 2 (its store counted attempt 1) and records it.
    const result = await drive(api, message);
    expect(result).toMatchObject({ attempts: 2, acked: true });
    const [delivery] = await deliveriesOf(api, app.projectId, message.runId);
    expect(delivery).toMatchObject({ status: "delivered", attempts: [{ attempt: 2, status_code: 200 }] });
    // The receiver saw the same bytes twice: delivery is at least once (receivers de-duplicate on the id).
    const requests = await received(hook.key);
    expect(requests).toHaveLength(2);
    expect(requests[1]!.bodySha256).toBe(requests[0]!.bodySha256);
  });
});

describe('queue send throwing "Queue is overloaded" when the delivery\'s lane cannot be reached', () => {
  it("is retried within the run's waitUntil: the delivery is queued once and delivered, the caller unaffected", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }]);
    const capture = capturingQueue();
    let overloaded = 2;
    const queue = {
      send: async (body: unknown, options?: QueueSendOptions) => {
        if (overloaded-- > 0) throw new Error("Queue is overloaded. Please back off.");
        return capture.queue.send(body, options);
      },
    };
    const response = await callWith(
      api,
      { WEBHOOK_QUEUE: queue, WEBHOOK_LANES: unreachableLanes() },
      `${app.runPath}?webhookEndpoint=${encodeURIComponent(hook.url)}`,
      {
        method: "POST",
        token: app.token,
        headers: { "Content-Type": "application/json" },
        body: "{}",
      },
    );
    expect(response.status).toBe(200);
    expect(capture.sent).toHaveLength(1);
    const runId = response.headers.get("x-run-id")!;
    expect((await deliveriesOf(api, app.projectId, runId))[0]).toMatchObject({ status: "pending" });
    await drive(api, capture.sent[0]);
    expect((await deliveriesOf(api, app.projectId, runId))[0]).toMatchObject({ status: "delivered" });
  });
});
