import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { received, receiver } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import { drive, runWithWebhook } from "../../test/webhooks";
import { verifyWebhook, WebhookVerificationError } from "./verify";

const api = client();
const SECRET = "receiver-side-secret";

/** A delivery as a receiver got it over HTTP: its headers and raw body. */
async function realDelivery() {
  const app = await seedRunnable(api);
  const hook = await receiver([{ status: 200 }], SECRET);
  const run = await runWithWebhook(api, app, hook.url, { secret: SECRET, body: { inputs: { text: "héllo", n: 1.0 } } });
  await drive(api, run.messages[0]);
  const [got] = await received(hook.key);
  return { headers: got!.headers, body: got!.body!, now: api.clock.now() };
}

async function failure(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error;
    throw error;
  }
  throw new Error("expected a WebhookVerificationError");
}

describe("verifyWebhook (exported for receivers)", () => {
  it("accepts a real delivery, from a string, bytes or a plain header object", async () => {
    const { headers, body, now } = await realDelivery();
    const expected = { id: headers["x-request-id"], timestamp: Number(headers["x-service-webhook-timestamp"]) };
    expect(await verifyWebhook(SECRET, headers, body, { now })).toEqual(expected);
    expect(
      await verifyWebhook(SECRET, new Headers(headers), new TextEncoder().encode(body), { now, toleranceSeconds: 300 }),
    ).toEqual(expected);
  });

  it("explains a re-serialised body", async () => {
    const { headers, body, now } = await realDelivery();
    const reserialised = JSON.stringify(JSON.parse(body), null, 2);
    const error = await failure(verifyWebhook(SECRET, headers, reserialised, { now }));
    expect(error.code).toBe("signature_mismatch");
    expect(error.message).toMatch(/raw bytes/);
  });

  it("refuses a wrong secret, a stale or future timestamp, and missing headers", async () => {
    const { headers, body, now } = await realDelivery();
    expect((await failure(verifyWebhook("another-secret", headers, body, { now }))).code).toBe("signature_mismatch");
    const late = new Date(now.getTime() + 301_000);
    const stale = await failure(verifyWebhook(SECRET, headers, body, { now: late }));
    expect(stale.code).toBe("stale_timestamp");
    expect(stale.message).toMatch(/301 s/);
    expect((await failure(verifyWebhook(SECRET, headers, body, { now: new Date(now.getTime() - 400_000) }))).code).toBe(
      "stale_timestamp",
    );
    expect(await verifyWebhook(SECRET, headers, body, { now: late, toleranceSeconds: 600 })).toBeTruthy();
    const { ["x-service-webhook-signature"]: _, ...unsigned } = headers;
    expect((await failure(verifyWebhook(SECRET, unsigned, body, { now }))).code).toBe("missing_header");
    const tampered = {
      ...headers,
      "x-service-webhook-timestamp": String(Number(headers["x-service-webhook-timestamp"]) + 1),
    };
    expect((await failure(verifyWebhook(SECRET, tampered, body, { now }))).code).toBe("signature_mismatch");
    expect(
      (await failure(verifyWebhook(SECRET, { ...headers, "x-service-webhook-signature": "v2,abc" }, body, { now })))
        .code,
    ).toBe("malformed_header");
  });
});
