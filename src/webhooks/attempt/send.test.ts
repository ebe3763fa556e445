import { describe, expect, it } from "vitest";
import { received, receiver } from "../../../test/peers";
import { productionDeps } from "../../deps";
import { outcomeOf, send, unsent } from "./send";
import type { SignedAttempt } from "./prepare";

type Ready = SignedAttempt;
const ready = (url: string, over: Partial<Ready> = {}): Ready => ({
  kind: "ready",
  attempt: 1,
  final: false,
  at: new Date(),
  url,
  headers: { "Content-Type": "application/json" },
  body: new TextEncoder().encode('{"ok":true}'),
  ...over,
});

describe("send: one POST of a prepared attempt (a real local receiver)", () => {
  it("posts the prepared bytes and headers, and reads 2xx as delivered", async () => {
    const hook = await receiver([{ status: 204 }]);
    const sent = await send(
      productionDeps,
      ready(hook.url, { headers: { "Content-Type": "application/json", "webhook-id": "msg_1" } }),
      2_000,
    );
    expect(sent).toMatchObject({ attempt: 1, statusCode: 204, error: null, outcome: "delivered" });
    const [request] = await received(hook.key);
    expect(request).toMatchObject({ method: "POST", body: '{"ok":true}' });
    expect(request!.headers["webhook-id"]).toBe("msg_1");
  });

  it("a 404 is retried before the last attempt and fails the last one; a 410 fails at once and says disable; Retry-After is kept", async () => {
    const missing = await receiver([{ status: 404, headers: { "Retry-After": "2" } }]);
    expect(await send(productionDeps, ready(missing.url), 2_000)).toMatchObject({
      statusCode: 404,
      outcome: "retry",
      retryAfter: "2",
    });
    expect(await send(productionDeps, ready(missing.url, { attempt: 3, final: true }), 2_000)).toMatchObject({
      outcome: "failed",
      reason: "attempts exhausted",
    });
    const gone = await receiver([{ status: 410 }]);
    expect(await send(productionDeps, ready(gone.url), 2_000)).toMatchObject({
      statusCode: 410,
      outcome: "failed",
      says: "disable",
      reason: "the receiver asked to be disabled",
    });
  });

  it("webhook-delivery: abort-message ends the delivery's attempts; disable beside a 2xx delivers and says disable", async () => {
    const abort = await receiver([{ status: 404, headers: { "webhook-delivery": "abort-message" } }]);
    expect(await send(productionDeps, ready(abort.url), 2_000)).toMatchObject({
      statusCode: 404,
      outcome: "failed",
      says: "abort-message",
    });
    const taken = await receiver([{ status: 200, headers: { "webhook-delivery": "Disable" } }]);
    expect(await send(productionDeps, ready(taken.url), 2_000)).toMatchObject({
      statusCode: 200,
      outcome: "delivered",
      says: "disable",
    });
    const plain = await receiver([{ status: 500 }]);
    expect(await send(productionDeps, ready(plain.url), 2_000)).toMatchObject({ outcome: "failed", says: null });
  });

  it("a receiver that holds the connection past the timeout is a timeout after the timeout, not before", async () => {
    const slow = await receiver([{ status: 200, delayMs: 3_000 }]);
    const sent = await send(productionDeps, ready(slow.url), 300);
    expect(sent).toMatchObject({ statusCode: null, error: "timeout", outcome: "retry" });
    expect(sent.durationMs).toBeGreaterThanOrEqual(290);
  });

  it("an attempt with nothing to send is recorded with its error, failed when it was the last or cannot recover", () => {
    const base = { kind: "unsendable" as const, attempt: 2, at: new Date(), reason: "r" };
    expect(unsent({ ...base, error: "body_unavailable", final: false })).toMatchObject({
      outcome: "retry",
      error: "body_unavailable",
      durationMs: 0,
    });
    expect(unsent({ ...base, error: "body_missing", final: true })).toMatchObject({
      outcome: "failed",
      error: "body_missing",
    });
  });

  it("outcomeOf: the recorded outcome of each class of answer", () => {
    expect(outcomeOf("delivered", true).outcome).toBe("delivered");
    expect(outcomeOf("permanent", false).outcome).toBe("failed");
    expect(outcomeOf("retry", false).outcome).toBe("retry");
    expect(outcomeOf("retry", true).outcome).toBe("failed");
  });
});
