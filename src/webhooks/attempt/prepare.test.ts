import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { deliveryMessages } from "../../../test/deliveries";
import { client, testDeps } from "../../../test/helpers";
import { PEER } from "../../../test/peers";
import { seedRunnable } from "../../../test/runs";
import { createScope } from "../../platform/scope";
import { verifyWebhook } from "../verify";
import { DeliveryInProgress, newDeliveryContext } from "./context";
import { prepare, signedAt } from "./prepare";
import { changeInDeliveryStores } from "../../../test/delivery-stores";

const api = client();
const ctx = () => newDeliveryContext(createScope(env, createExecutionContext(), testDeps({ now: api.clock.now })));

describe("prepare: an attempt's claim and its request, signed as it is sent", () => {
  it("claims attempts 1, 2, 3 in D1, then finds them exhausted; each is signed afresh over the exact bytes", async () => {
    const app = await seedRunnable(api);
    const secret = "whsec_" + btoa("prepare-test-secret");
    const [message] = await deliveryMessages(api, app.projectId, `${PEER}/hooks/prepare`, ['{"n":1}'], secret);
    const delivery = new DeliveryInProgress(message!);
    const c = ctx();
    for (const attempt of [1, 2, 3]) {
      const prepared = await prepare(c, delivery);
      expect(prepared).toMatchObject({ kind: "ready", attempt, final: attempt === 3, url: message!.endpoint });
      if (prepared.kind !== "ready") return;
      expect(new TextDecoder().decode(prepared.body)).toBe('{"n":1}');
      // Signed for the moment it is sent: a lane's slot may come a while after the claim.
      const sentAt = new Date(prepared.at.getTime() + 7_000);
      const signed = await signedAt(delivery, prepared, sentAt);
      expect(signed.at).toEqual(sentAt);
      await expect(verifyWebhook(secret, signed.headers, signed.body, { now: sentAt })).resolves.toBeDefined();
      expect(signed.headers["webhook-timestamp"]).toBe(String(Math.floor(sentAt.getTime() / 1000)));
    }
    expect(await prepare(c, delivery)).toMatchObject({ kind: "exhausted", attempts: 3 });
    delivery.release();
  });

  it("a delivery whose record is settled is settled: nothing is sent", async () => {
    const app = await seedRunnable(api);
    const [message] = await deliveryMessages(api, app.projectId, `${PEER}/hooks/prepare-settled`, ["{}"]);
    await changeInDeliveryStores(
      "UPDATE webhook_deliveries SET status = 'delivered' WHERE id = ?",
      [message!.id],
      message!.id,
    );
    expect(await prepare(ctx(), new DeliveryInProgress(message!))).toEqual({ kind: "settled" });
  });

  it("a claimed attempt whose stored body is gone is unsendable and final", async () => {
    const app = await seedRunnable(api);
    const [message] = await deliveryMessages(api, app.projectId, `${PEER}/hooks/prepare-missing`, ["{}"]);
    const prepared = await prepare(ctx(), new DeliveryInProgress({ ...message!, body: { r2: "webhook-bodies/none" } }));
    expect(prepared).toMatchObject({ kind: "unsendable", attempt: 1, error: "body_missing", final: true });
  });

  it("holds the body's share of the budget from its first attempt until released", async () => {
    const app = await seedRunnable(api);
    const [message] = await deliveryMessages(api, app.projectId, `${PEER}/hooks/prepare-budget`, ["x".repeat(1000)]);
    const c = ctx();
    const delivery = new DeliveryInProgress(message!);
    await prepare(c, delivery);
    await prepare(c, delivery);
    expect(c.budget.highWater).toBeGreaterThanOrEqual(1000);
    expect(c.budget.highWater).toBeLessThan(2000);
    delivery.release();
    const again = await c.budget.acquire(c.budget.highWater);
    again();
  });
});
