import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { client } from "../../test/helpers";
import { received, receiver } from "../../test/peers";
import { capturingQueue, seedRunnable } from "../../test/runs";
import { TEST_SECRETS } from "../../test/secrets";
import { drive, runWithWebhook } from "../../test/webhooks";
import type { DeliveryMessage } from "./message";
import { openSecret, sealSecret } from "./secret-box";

// Rotating WEBHOOK_ENCRYPTION_KEY (docs/operations.md): secrets sealed before the rotation wait in
// queue messages, lanes and D1 (for resends); with WEBHOOK_ENCRYPTION_KEY_PREVIOUS they still open.
const OLD_KEY = TEST_SECRETS.WEBHOOK_ENCRYPTION_KEY;
const NEW_KEY = "rotated-webhook-key-0123456789abcdefghijklmnop";
const SECRET = "rotation-secret-0123456789";
const rotating = { WEBHOOK_ENCRYPTION_KEY: NEW_KEY, WEBHOOK_ENCRYPTION_KEY_PREVIOUS: OLD_KEY };
const api = client();

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe("sealed webhook secrets across a WEBHOOK_ENCRYPTION_KEY rotation", () => {
  it("opens with the current key, then the previous one; never with a key that did not seal it", async () => {
    const sealed = await sealSecret(OLD_KEY, "whd_1", SECRET);
    expect(await openSecret(NEW_KEY, "whd_1", sealed, OLD_KEY)).toBe(SECRET);
    expect(await openSecret(OLD_KEY, "whd_1", sealed)).toBe(SECRET);
    await expect(openSecret(NEW_KEY, "whd_1", sealed)).rejects.toThrow();
    // Still bound to its delivery: the previous key does not let a ciphertext move to another id.
    await expect(openSecret(NEW_KEY, "whd_2", sealed, OLD_KEY)).rejects.toThrow();
  });

  it("delivers, signed, a delivery queued before the rotation and attempted after it", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }], SECRET);
    const run = await runWithWebhook(api, app, hook.url, { secret: SECRET }); // sealed under the old key
    const end = await drive(api, run.messages[0], rotating);
    expect(end.acked).toBe(true);
    const got = await received(hook.key);
    expect(got).toHaveLength(1);
    expect(got[0]!.signatures).toEqual({ node: true, openssl: true, standard: true });
  });

  it("without the previous key, such a delivery fails as secret_unreadable rather than going out unsigned", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }], SECRET);
    const run = await runWithWebhook(api, app, hook.url, { secret: SECRET });
    await drive(api, run.messages[0], { WEBHOOK_ENCRYPTION_KEY: NEW_KEY });
    expect(await received(hook.key)).toHaveLength(0);
    const id = (run.messages[0] as DeliveryMessage).id;
    const listed = await api.json<{ data: { request_id: string; status: string; last_error: string | null }[] }>(
      `/v2/projects/${app.projectId}/webhook-deliveries?run_id=${(run.messages[0] as DeliveryMessage).runId}`,
      { token: app.token },
    );
    expect(listed.body.data.find((d) => d.request_id === id)).toMatchObject({
      status: "failed",
      last_error: "secret_unreadable",
    });
  });

  it("resends, signed afresh, a delivery whose secret was sealed before the rotation", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }, { status: 200 }], SECRET);
    const run = await runWithWebhook(api, app, hook.url, { secret: SECRET });
    await drive(api, run.messages[0]);
    const sent: unknown[] = [];
    const after = client({ now: api.clock.now }, { ...rotating, ...capturingQueue(sent).bindings });
    const id = (run.messages[0] as DeliveryMessage).id;
    const answer = await after.json(`/v2/projects/${app.projectId}/webhook-deliveries/${id}/resend`, {
      method: "POST",
      token: app.token,
    });
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({ signed: true, resent_from: id });
    await drive(api, sent[0], { WEBHOOK_ENCRYPTION_KEY: NEW_KEY }); // sealed again under the new key: opens without the previous
    const got = await received(hook.key);
    expect(got).toHaveLength(2);
    expect(got[1]!.signatures).toEqual({ node: true, openssl: true, standard: true });
  });
});
