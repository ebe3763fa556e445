import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { client, seedProject } from "../../test/helpers";
import { PEER, received, receiver } from "../../test/peers";
import { capturingQueue, seedRunnable } from "../../test/runs";
import { type DeliveryJson, drive, runWithWebhook } from "../../test/webhooks";
import type { DeliveryMessage } from "./message";
import { RETENTION_MS } from "./housekeeping";
import { shardOf } from "../platform/shards";
import { changeInDeliveryStores, firstInDeliveryStores, sweepDeliveryStores } from "../../test/delivery-stores";

const api = client();
const SECRET = "resend-secret-0123456789";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

const resendPath = (projectId: string, id: string) => `/v2/projects/${projectId}/webhook-deliveries/${id}/resend`;

/** Resends through the API, capturing the new delivery's queue message. */
async function resendNow(projectId: string, id: string, token: string) {
  const sent: unknown[] = [];
  const local = client({ now: api.clock.now }, capturingQueue(sent).bindings);
  const answer = await local.json<DeliveryJson & { type?: string; code?: string }>(resendPath(projectId, id), {
    method: "POST",
    token,
  });
  return { ...answer, messages: sent };
}

describe("POST …/webhook-deliveries/{delivery_id}/resend", () => {
  it("delivers the stored body again as a new delivery, linked by resent_from, with the original's message id and a fresh signature", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }], SECRET);
    const run = await runWithWebhook(api, app, hook.url, { secret: SECRET });
    await drive(api, run.messages[0]);
    const original = (run.messages[0] as DeliveryMessage).id;

    api.clock.advance(3600_000);
    const answer = await resendNow(app.projectId, original, app.token);
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({ status: "pending", resent_from: original, signed: true, attempts: [] });
    // Its own record, the original's message id (Standard Webhooks: the id stays when a message is resent).
    expect(answer.body.delivery_id).not.toBe(original);
    expect(answer.body.request_id).toBe(original);
    // Both in the run's shard (platform/shards.ts): a run's deliveries are found from its id.
    expect(shardOf(original)).toBe(shardOf(answer.body.run_id));
    expect(shardOf(answer.body.delivery_id)).toBe(shardOf(answer.body.run_id));
    expect(JSON.stringify(answer.messages)).not.toContain(SECRET);
    await drive(api, answer.messages[0]);

    const got = await received(hook.key);
    expect(got).toHaveLength(2);
    expect(got[1]!.body).toBe(run.text);
    expect(got[1]!.headers["x-request-id"]).toBe(original);
    expect(got[1]!.headers["webhook-id"]).toBe(original);
    expect(got[0]!.headers["webhook-id"]).toBe(original);
    // Signed at the moment of the new attempt, so a receiver's timestamp tolerance passes.
    expect(Number(got[1]!.headers["x-service-webhook-timestamp"])).toBe(Math.floor(api.clock.now().getTime() / 1000));
    expect(got[1]!.signatures).toEqual({ node: true, openssl: true, standard: true });
  });

  it("resends a large body kept in R2", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?bytes=${200 * 1024}`);
    const hook = await receiver([{ status: 200 }]);
    const run = await runWithWebhook(api, app, hook.url);
    await drive(api, run.messages[0]);
    const answer = await resendNow(app.projectId, (run.messages[0] as DeliveryMessage).id, app.token);
    expect(answer.status).toBe(201);
    await drive(api, answer.messages[0]);
    const got = await received(hook.key);
    expect(got).toHaveLength(2);
    expect(got[1]!.bodySha256).toBe(got[0]!.bodySha256);
  });

  it("answers 410 once the retention has passed and its body was purged", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }]);
    const run = await runWithWebhook(api, app, hook.url, { secret: SECRET });
    await drive(api, run.messages[0]);
    const id = (run.messages[0] as DeliveryMessage).id;
    await sweepDeliveryStores(new Date(api.clock.now().getTime() + RETENTION_MS + 60_000));
    const answer = await resendNow(app.projectId, id, app.token);
    expect(answer.status).toBe(410);
    expect(answer.headers.get("content-type")).toContain("application/problem+json");
    expect(answer.body).toMatchObject({ code: "gone" });
    // The signed delivery's sealed secret went with its body.
    const row = await firstInDeliveryStores(
      "SELECT body, body_key, sealed_secret, body_purged_at FROM webhook_deliveries WHERE id = ?",
      [id],
      id,
    );
    expect(row).toMatchObject({ body: null, sealed_secret: null, body_purged_at: expect.any(Number) });
  });

  it.each(["run_interrupted", "enqueue_failed", "never_attempted"])(
    "answers 409, not 410, for a delivery that ended %s before its body was ever stored",
    async (reason) => {
      const app = await seedRunnable(api);
      const hook = await receiver([{ status: 200 }]);
      const run = await runWithWebhook(api, app, hook.url, { secret: SECRET });
      const id = (run.messages[0] as DeliveryMessage).id;
      // As the run path leaves it when the run is cut short or the queue stays unavailable: no body kept.
      await changeInDeliveryStores(
        "UPDATE webhook_deliveries SET status = 'failed', last_error = ? WHERE id = ?",
        [reason, id],
        id,
      );
      const answer = await resendNow(app.projectId, id, app.token);
      expect(answer.status).toBe(409);
      expect(answer.body).toMatchObject({ code: "conflict" });
      expect(String((answer.body as { detail?: string }).detail)).toContain(reason);
      expect(answer.messages).toHaveLength(0);
    },
  );

  it("answers 404 for another project's delivery, an unknown one and a malformed id, and sends nothing", async () => {
    const app = await seedRunnable(api);
    const other = await seedProject(api);
    const hook = await receiver([{ status: 200 }]);
    const run = await runWithWebhook(api, app, hook.url);
    await drive(api, run.messages[0]);
    const id = (run.messages[0] as DeliveryMessage).id;
    expect((await resendNow(other.projectId, id, other.token)).status).toBe(404);
    expect((await resendNow(app.projectId, `whd_${"0".repeat(30)}`, app.token)).status).toBe(404);
    expect((await resendNow(app.projectId, "not-an-id", app.token)).status).toBe(404);
    expect(await received(hook.key)).toHaveLength(1);
  });

  it("is in the OpenAPI document with its scope", async () => {
    const { body } = await api.json<{
      paths: Record<string, Record<string, { security: unknown; responses: Record<string, unknown> }>>;
    }>("/v2/openapi.json");
    const op =
      body.paths["/v2/projects/{project_id}/webhook-deliveries/{delivery_id}/resend"]?.post ??
      body.paths["/projects/{project_id}/webhook-deliveries/{delivery_id}/resend"]?.post;
    expect(op?.security).toEqual([{ bearerAuth: ["deliveries:write"] }]);
    expect(Object.keys(op!.responses)).toEqual(expect.arrayContaining(["201", "404", "410"]));
  });
});
