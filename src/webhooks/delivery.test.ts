import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { client } from "../../test/helpers";
import { DOWN, PEER, received, receiver, sha256Hex } from "../../test/peers";
import { deliveryMessages } from "../../test/deliveries";
import { callWith, capturingQueue, seedRunnable, unreachableLanes } from "../../test/runs";
import { deliveriesOf, drive, runWithWebhook } from "../../test/webhooks";
import type { DeliveryMessage } from "./message";
import { INLINE_MESSAGE_MAX_BYTES, MAX_ATTEMPTS } from "./policy";

const api = client();
const SECRET = "s3cret-for-signing-deliveries";

// Failed deliveries log an error line by design; tests that care read the spy.
beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("webhook delivery: what the receiver gets", () => {
  it("POSTs the exact bytes the caller got, signed (checked by Node crypto, openssl and Standard Webhooks rules)", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }], SECRET);
    const run = await runWithWebhook(api, app, hook.url, { secret: SECRET });
    expect(run.response.status).toBe(200);
    expect(run.messages).toHaveLength(1);
    expect(await drive(api, run.messages[0])).toMatchObject({ attempts: 1, acked: true });

    const [got] = await received(hook.key);
    expect(got!.method).toBe("POST");
    expect(got!.body).toBe(run.text);
    expect(got!.headers["content-type"]).toBe("application/json");
    expect(got!.headers["x-request-id"]).toMatch(/^whd_/);
    expect(got!.headers["webhook-id"]).toBe(got!.headers["x-request-id"]);
    expect(got!.headers["x-service-webhook-timestamp"]).toBe(String(Math.floor(api.clock.now().getTime() / 1000)));
    expect(got!.headers["x-service-webhook-signature"]).toMatch(/^v1,[0-9a-f]{64}$/);
    expect(got!.signatures).toEqual({ node: true, openssl: true, standard: true });

    const [delivery] = await deliveriesOf(api, app.projectId, JSON.parse(run.text).run_id);
    expect(delivery).toMatchObject({
      request_id: got!.headers["x-request-id"],
      status: "delivered",
      signed: true,
      last_status_code: 200,
    });
    expect(delivery!.attempts).toEqual([expect.objectContaining({ attempt: 1, status_code: 200, error: null })]);
  });

  it("keys the Standard Webhooks signature with the decoded bytes of a whsec_ secret", async () => {
    const app = await seedRunnable(api);
    const secret = `whsec_${btoa("0123456789abcdef0123456789abcdef")}`;
    const hook = await receiver([{ status: 204 }], secret);
    const run = await runWithWebhook(api, app, hook.url, { secret });
    await drive(api, run.messages[0]);
    const [got] = await received(hook.key);
    expect(got!.signatures).toEqual({ node: true, openssl: true, standard: true });
  });

  it("sends no signature headers without a secret", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const run = await runWithWebhook(api, app, hook.url);
    await drive(api, run.messages[0]);
    const [got] = await received(hook.key);
    expect(got!.body).toBe(run.text);
    expect(got!.headers["content-type"]).toBe("application/json");
    expect(got!.headers["x-service-webhook-signature"]).toBeUndefined();
    expect(got!.headers["webhook-signature"]).toBeUndefined();
  });

  it("keeps the secret encrypted in the queue message and out of every log line", async () => {
    const errors = vi.spyOn(console, "error");
    const app = await seedRunnable(api);
    const run = await runWithWebhook(api, app, `${DOWN}/hook`, { secret: SECRET });
    const message = run.messages[0] as DeliveryMessage;
    expect(JSON.stringify(message)).not.toContain(SECRET);
    expect(message.secret).toEqual({ iv: expect.any(String), ct: expect.any(String) });
    await drive(api, message);
    expect(errors).toHaveBeenCalled();
    for (const call of errors.mock.calls) expect(JSON.stringify(call)).not.toContain(SECRET);
  });

  it("delivers a 5 MB body intact: stored in R2, referenced by the message, kept for resending", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?bytes=${5 * 1024 * 1024}`);
    const hook = await receiver([{ status: 200 }], SECRET);
    const run = await runWithWebhook(api, app, hook.url, { secret: SECRET });
    expect(run.text.length).toBeGreaterThan(5 * 1024 * 1024);
    const message = run.messages[0] as DeliveryMessage;
    expect("r2" in message.body).toBe(true);
    expect(JSON.stringify(message).length).toBeLessThan(2048);
    await drive(api, message);
    const [got] = await received(hook.key);
    expect(got!.bodyLength).toBe(run.text.length);
    expect(got!.bodySha256).toBe(await sha256Hex(run.text));
    expect(got!.signatures).toEqual({ node: true, openssl: true, standard: true });
    expect(await env.WEBHOOK_BODIES.head((message.body as { r2: string }).r2)).not.toBeNull();
  });

  it("measures the inline limit on the serialised message: a body under 64 KiB that JSON escaping doubles goes by R2, intact", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }]);
    // 30,000 quotes, each written `\"` in the body and `\\\"` once the message is serialised.
    const body = JSON.stringify({ quotes: '"'.repeat(30_000) });
    expect(new TextEncoder().encode(body).byteLength).toBeLessThan(INLINE_MESSAGE_MAX_BYTES);
    const [message] = await deliveryMessages(api, app.projectId, hook.url, [body]);
    expect(JSON.stringify({ ...message, body: { inline: body } }).length).toBeGreaterThan(INLINE_MESSAGE_MAX_BYTES);
    expect("r2" in message!.body).toBe(true);
    expect(JSON.stringify(message).length).toBeLessThan(2048);
    await drive(api, message!);
    const [got] = await received(hook.key);
    expect(got!.bodySha256).toBe(await sha256Hex(body));
  });

  it("also delivers the caller's 502 problem when the app fails: it is the run's answer", async () => {
    const app = await seedRunnable(api, `${DOWN}/app`);
    const hook = await receiver();
    const run = await runWithWebhook(api, app, hook.url);
    expect(run.response.status).toBe(502);
    await drive(api, run.messages[0]);
    const [got] = await received(hook.key);
    expect(got!.body).toBe(run.text);
  });
});

describe("webhook delivery: outcome rules (spec section 7), 3 attempts at most 5 s apart", () => {
  const cases: {
    name: string;
    answers: { status: number; headers?: Record<string, string>; delayMs?: number; hangUp?: boolean }[];
    attempts: number;
    status: string;
    last: Record<string, unknown>;
  }[] = [
    {
      name: "2xx: delivered",
      answers: [{ status: 202 }],
      attempts: 1,
      status: "delivered",
      last: { status_code: 202 },
    },
    {
      name: "404: retried, then failed",
      answers: [{ status: 404 }],
      attempts: 3,
      status: "failed",
      last: { status_code: 404 },
    },
    {
      name: "404 then 2xx: delivered on the retry",
      answers: [{ status: 404 }, { status: 404 }, { status: 200 }],
      attempts: 3,
      status: "delivered",
      last: { status_code: 200 },
    },
    {
      name: "other 4xx (400): permanent",
      answers: [{ status: 400 }],
      attempts: 1,
      status: "failed",
      last: { status_code: 400 },
    },
    {
      name: "other 4xx (410): permanent",
      answers: [{ status: 410 }],
      attempts: 1,
      status: "failed",
      last: { status_code: 410 },
    },
    {
      name: "other 4xx (429): permanent",
      answers: [{ status: 429 }],
      attempts: 1,
      status: "failed",
      last: { status_code: 429 },
    },
    {
      name: "5xx (500): not retried",
      answers: [{ status: 500 }],
      attempts: 1,
      status: "failed",
      last: { status_code: 500 },
    },
    {
      name: "5xx (503): not retried",
      answers: [{ status: 503 }],
      attempts: 1,
      status: "failed",
      last: { status_code: 503 },
    },
    {
      name: "redirect (302), not followed: retried",
      answers: [{ status: 302, headers: { Location: "https://example.com/" } }],
      attempts: 3,
      status: "failed",
      last: { status_code: 302 },
    },
    {
      name: "other non-2xx (304): retried",
      answers: [{ status: 304 }],
      attempts: 3,
      status: "failed",
      last: { status_code: 304 },
    },
    {
      name: "connection reset: retried",
      answers: [{ status: 200, hangUp: true }],
      attempts: 3,
      status: "failed",
      last: { error: "connection_failed" },
    },
    {
      name: "timeout: retried",
      answers: [{ status: 200, delayMs: 600 }],
      attempts: 3,
      status: "failed",
      last: { error: "timeout" },
    },
  ];

  it.each(cases)("$name ($attempts attempt(s))", async ({ answers, attempts, status, last }) => {
    const app = await seedRunnable(api);
    const hook = await receiver(answers, SECRET);
    const run = await runWithWebhook(api, app, hook.url, { secret: SECRET });
    const driven = await drive(api, run.messages[0], { WEBHOOK_TIMEOUT_MS: "250" });
    expect(driven.attempts).toBe(attempts);
    expect(driven.acked).toBe(true);
    for (const delay of driven.delays) expect(delay).toBeLessThanOrEqual(4);
    const got = await received(hook.key);
    expect(got).toHaveLength(attempts);
    // One id per delivery, the same on every attempt; a fresh timestamp and signature on each.
    expect(new Set(got.map((r) => r.headers["x-request-id"])).size).toBe(1);
    expect(new Set(got.map((r) => r.headers["x-service-webhook-timestamp"])).size).toBe(attempts);
    for (const r of got) expect(r.signatures).toEqual({ node: true, openssl: true, standard: true });
    const [delivery] = await deliveriesOf(api, app.projectId, JSON.parse(run.text).run_id);
    expect(delivery!.status).toBe(status);
    expect(delivery!.attempts.map((a) => a.attempt)).toEqual(Array.from({ length: attempts }, (_, i) => i + 1));
    expect(delivery!.attempts.at(-1)).toMatchObject(last);
  });

  it("retries a receiver that is down 3 times, while the caller got its answer at once", async () => {
    const errors = vi.spyOn(console, "error");
    const app = await seedRunnable(api);
    const capture = capturingQueue();
    const ctx = createExecutionContext();
    const started = Date.now();
    const response = await api.worker.fetch(
      new Request(`http://localhost${app.runPath}?webhookEndpoint=${encodeURIComponent(`${DOWN}/hook`)}`, {
        headers: { Authorization: `Bearer ${app.token}` },
      }),
      { ...env, ...capture.bindings },
      ctx,
    );
    expect(response.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1000);
    await waitOnExecutionContext(ctx);
    const driven = await drive(api, capture.sent[0]);
    expect(driven.attempts).toBe(MAX_ATTEMPTS);
    const [delivery] = await deliveriesOf(api, app.projectId, response.headers.get("x-run-id")!);
    expect(delivery).toMatchObject({ status: "failed", last_error: "connection_failed" });
    const lines = errors.mock.calls
      .map((call) => call[0] as Record<string, unknown>)
      .filter((line) => line.message === "webhook delivery failed");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: "error",
      reason: "attempts exhausted",
      attempts: 3,
      run_id: response.headers.get("x-run-id"),
    });
  });

  it("honours Retry-After up to the 4 s cap (the claim of the next attempt fits in the 5 s)", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([
      { status: 404, headers: { "Retry-After": "2" } },
      { status: 404, headers: { "Retry-After": "120" } },
      { status: 200 },
    ]);
    const run = await runWithWebhook(api, app, hook.url);
    expect((await drive(api, run.messages[0])).delays).toEqual([2, 4]);
  });

  it("records the delivery as failed when neither its lane nor the queue takes it, and the caller is unaffected", async () => {
    const errors = vi.spyOn(console, "error");
    const app = await seedRunnable(api);
    const broken = { send: async () => Promise.reject(new Error("queue unavailable")) };
    const response = await callWith(
      api,
      { WEBHOOK_QUEUE: broken, WEBHOOK_LANES: unreachableLanes() },
      `${app.runPath}?webhookEndpoint=${encodeURIComponent(`${PEER}/hooks/x`)}`,
      { token: app.token },
    );
    expect(response.status).toBe(200);
    const [delivery] = await deliveriesOf(api, app.projectId, response.headers.get("x-run-id")!);
    expect(delivery).toMatchObject({ status: "failed", last_error: "enqueue_failed", attempts: [] });
    expect(
      errors.mock.calls.some((call) =>
        JSON.stringify(call[0]).includes("could not be handed to its lane or the queue"),
      ),
    ).toBe(true);
  });

  it("ends failed, not pending forever, when a stored body stays unreadable for every attempt", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?bytes=${100 * 1024}`);
    const hook = await receiver();
    const run = await runWithWebhook(api, app, hook.url);
    const broken = { get: () => Promise.reject(new Error("R2 unavailable")), delete: () => Promise.resolve() };
    expect((await drive(api, run.messages[0], { WEBHOOK_BODIES: broken })).attempts).toBe(MAX_ATTEMPTS);
    expect(await received(hook.key)).toHaveLength(0);
    const [delivery] = await deliveriesOf(api, app.projectId, JSON.parse(run.text).run_id);
    expect(delivery).toMatchObject({ status: "failed", last_error: "body_unavailable" });
  });

  it("does not send a message again once its delivery is settled (queues deliver at least once)", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const run = await runWithWebhook(api, app, hook.url);
    await drive(api, run.messages[0]);
    await drive(api, run.messages[0]);
    expect(await received(hook.key)).toHaveLength(1);
  });
});

describe("webhook delivery through the real queue", () => {
  it("is consumed by the Worker's queue handler as configured in wrangler.toml", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }], SECRET);
    const res = await api.call(`${app.runPath}?webhookEndpoint=${encodeURIComponent(hook.url)}`, {
      token: app.token,
      headers: { "X-Webhook-Secret": SECRET },
    });
    const text = await res.text();
    let got = await received(hook.key);
    for (let i = 0; i < 50 && got.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      got = await received(hook.key);
    }
    expect(got).toHaveLength(1);
    expect(got[0]!.body).toBe(text);
    expect(got[0]!.signatures).toEqual({ node: true, openssl: true, standard: true });
  });
});
