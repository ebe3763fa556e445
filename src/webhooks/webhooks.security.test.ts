import { QUEUES } from "../platform/triggers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { client } from "../../test/helpers";
import { wranglerEnvironments } from "../../test/wrangler";
import { passToLanes } from "../../test/deliveries";
import { received, receiver } from "../../test/peers";
import { capturingQueue, seedRunnable } from "../../test/runs";
import { deliveriesOf, drive, runWithWebhook } from "../../test/webhooks";
import { attemptsLeft } from "./lane";
import type { DeliveryMessage } from "./message";
import {
  ATTEMPTS_PER_LANE_INVOCATION,
  LANE_CONCURRENCY,
  LANE_SUBREQUESTS_PER_INVOCATION,
  SUBREQUESTS_PER_ATTEMPT,
  SUBREQUESTS_PER_ACCEPT,
} from "./lane-capacity";
import { MAX_GAP_MS, MAX_RETRY_DELAY_SECONDS, RETRY_DELAYS_SECONDS } from "./policy";

const api = client();

afterEach(() => {
  vi.restoreAllMocks();
});

describe("webhook deliveries list (GET /v2/projects/{project_id}/webhook-deliveries)", () => {
  it("lists a project's deliveries, filtered by run_id and paginated", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const runIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const run = await runWithWebhook(api, app, hook.url);
      runIds.push(JSON.parse(run.text).run_id);
      api.clock.advance(1);
    }
    const page1 = await api.json<{ data: { run_id: string }[]; next_cursor: string }>(
      `/v2/projects/${app.projectId}/webhook-deliveries?limit=2`,
      { token: app.token },
    );
    expect(page1.status).toBe(200);
    expect(page1.body.data.map((d) => d.run_id)).toEqual([runIds[2], runIds[1]]);
    const page2 = await api.json<{ data: { run_id: string }[]; next_cursor: null }>(
      `/v2/projects/${app.projectId}/webhook-deliveries?limit=2&cursor=${page1.body.next_cursor}`,
      { token: app.token },
    );
    expect(page2.body.data.map((d) => d.run_id)).toEqual([runIds[0]]);
    expect(page2.body.next_cursor).toBeNull();
    expect((await deliveriesOf(api, app.projectId, runIds[1]!)).map((d) => d.status)).toEqual(["pending"]);
  });

  it("never shows another project's deliveries: 404 for its list, nothing for its run ids", async () => {
    const a = await seedRunnable(api);
    const b = await seedRunnable(api);
    const run = await runWithWebhook(api, a, (await receiver()).url);
    const runId = JSON.parse(run.text).run_id;
    expect((await api.json(`/v2/projects/${a.projectId}/webhook-deliveries`, { token: b.token })).status).toBe(404);
    const filtered = await api.json<{ data: unknown[] }>(
      `/v2/projects/${b.projectId}/webhook-deliveries?run_id=${runId}`,
      { token: b.token },
    );
    expect(filtered.body.data).toEqual([]);
    expect((await api.json(`/v2/projects/${a.projectId}/webhook-deliveries`, { token: null })).status).toBe(401);
    expect(
      (await api.json(`/v2/projects/${a.projectId}/webhook-deliveries?cursor=bogus`, { token: a.token })).status,
    ).toBe(400);
    expect(
      (await api.json(`/v2/projects/${a.projectId}/webhook-deliveries?limit=1000`, { token: a.token })).status,
    ).toBe(400);
  });
});

describe("webhook deliveries in the API description", () => {
  it("documents the list in /v2/openapi.json", async () => {
    const { status, body } = await api.json<{ paths: Record<string, unknown> }>("/v2/openapi.json", { token: null });
    expect(status).toBe(200);
    expect(body.paths).toHaveProperty(["/projects/{project_id}/webhook-deliveries"]);
  });
});

describe("webhook queue messages", () => {
  it("never sends a delivery whose sealed secret was tampered with (nor sends it unsigned)", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const app = await seedRunnable(api);
    const hook = await receiver();
    const run = await runWithWebhook(api, app, hook.url, { secret: "s" });
    const message = structuredClone(run.messages[0]) as DeliveryMessage;
    message.secret = { ...message.secret!, ct: btoa("forged ciphertext!") };
    expect((await drive(api, message)).attempts).toBe(1);
    expect(await received(hook.key)).toHaveLength(0);
    const [delivery] = await deliveriesOf(api, app.projectId, message.runId);
    expect(delivery).toMatchObject({ status: "failed", last_error: "secret_unreadable" });
  });

  it("drops a message of unknown shape with a log line instead of retrying it forever", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const result = await passToLanes(api, [{ hello: "world" }]);
    expect(result).toMatchObject({ explicitAcks: ["m0"], retryMessages: [] });
    expect(errors.mock.calls.some((call) => JSON.stringify(call[0]).includes("unreadable webhook message"))).toBe(true);
  });
});

describe("resends receivers can recognise", () => {
  /** Resends through the API as `token`, capturing the new delivery's queue message. */
  async function resend(projectId: string, deliveryId: string, token: string) {
    const sent: unknown[] = [];
    const local = client({ now: api.clock.now }, capturingQueue(sent).bindings);
    const answer = await local.json<{ delivery_id: string; request_id: string; resent_from: string; code?: string }>(
      `/v2/projects/${projectId}/webhook-deliveries/${deliveryId}/resend`,
      {
        method: "POST",
        token,
      },
    );
    return { ...answer, message: sent[0] };
  }

  it("a resend is not a replay under a new id: it and a resend of the resend carry the original's webhook-id and X-Request-Id, freshly signed", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const app = await seedRunnable(api);
    const secret = "whsec_" + btoa("resend-dedupe-key-0123456789abcdef");
    const hook = await receiver([{ status: 200 }], secret);
    const run = await runWithWebhook(api, app, hook.url, { secret });
    await drive(api, run.messages[0]);
    const original = (run.messages[0] as DeliveryMessage).id;

    api.clock.advance(60_000);
    const first = await resend(app.projectId, original, app.token);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ request_id: original, resent_from: original });
    await drive(api, first.message);
    api.clock.advance(60_000);
    const second = await resend(app.projectId, first.body.delivery_id, app.token);
    expect(second.body).toMatchObject({ request_id: original, resent_from: first.body.delivery_id });
    await drive(api, second.message);

    const got = await received(hook.key);
    expect(got).toHaveLength(3);
    // A receiver that de-duplicates by webhook-id, as the docs advise, acts once.
    expect(new Set(got.map((r) => r.headers["webhook-id"]))).toEqual(new Set([original]));
    expect(new Set(got.map((r) => r.headers["x-request-id"]))).toEqual(new Set([original]));
    // Each one signed at its own attempt, and the signatures verify over the shared id.
    expect(new Set(got.map((r) => r.headers["webhook-timestamp"])).size).toBe(3);
    for (const r of got) expect(r.signatures).toEqual({ node: true, openssl: true, standard: true });
    // Three records, linked, all under one message id.
    const records = await deliveriesOf(api, app.projectId, (run.messages[0] as DeliveryMessage).runId);
    expect(records.map((d) => d.request_id)).toEqual([original, original, original]);
    expect(new Set(records.map((d) => d.delivery_id)).size).toBe(3);
  });

  it("a token with the default scopes cannot trigger a resend: deliveries:write is granted only by name", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }]);
    const run = await runWithWebhook(api, app, hook.url);
    await drive(api, run.messages[0]);
    const expires_at = new Date(api.clock.now().getTime() + 86_400_000).toISOString();
    const byDefault = await api.json<{ token: string; scopes: string[] }>(
      `/v2/projects/${app.projectId}/service-accounts`,
      { method: "POST", body: { name: "defaults", expires_at } },
    );
    expect(byDefault.body.scopes).toContain("deliveries:read");
    expect(byDefault.body.scopes).not.toContain("deliveries:write");
    const refused = await resend(app.projectId, (run.messages[0] as DeliveryMessage).id, byDefault.body.token);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("insufficient_scope");
    expect(refused.message).toBeUndefined();
    expect(await received(hook.key)).toHaveLength(1);
  });
});

describe("wrangler.toml agrees with the delivery policy", () => {
  const environments = wranglerEnvironments();

  it.each(environments)(
    "%s: the webhook consumer's batches fit the limits its attempts are planned for, and give up into the dead-letter queue",
    (_, section) => {
      const consumers = (section.queues?.consumers ?? []).filter((c) => c.queue === QUEUES.webhookDeliveries);
      expect(consumers).toHaveLength(1);
      const consumer = consumers[0]!;
      // Attempts are spaced inside the lane's invocation (≤ 4 s pause + one claim), not by queue retries.
      expect(Math.max(...RETRY_DELAYS_SECONDS, MAX_RETRY_DELAY_SECONDS) * 1000).toBeLessThan(MAX_GAP_MS);
      // The consumer only passes deliveries to their lanes (one Durable Object call per lane a batch touches): within Workers Free's 50 subrequests.
      expect(consumer.max_batch_size * SUBREQUESTS_PER_ACCEPT).toBeLessThanOrEqual(50);
      // A lane's alarm starts an attempt only while its worst case fits beside the subrequests made and the
      // worst case of the attempts in flight (one kept for its settings' read); a fresh one, at least 454.
      expect(attemptsLeft(LANE_SUBREQUESTS_PER_INVOCATION, 0)).toBe(ATTEMPTS_PER_LANE_INVOCATION);
      for (let made = 0; made <= LANE_SUBREQUESTS_PER_INVOCATION; made += 7)
        for (let inFlight = 0; inFlight <= LANE_CONCURRENCY; inFlight++)
          if (attemptsLeft(LANE_SUBREQUESTS_PER_INVOCATION - made, inFlight) >= 1)
            expect(made + SUBREQUESTS_PER_ATTEMPT * (inFlight + 1) + 1).toBeLessThanOrEqual(
              LANE_SUBREQUESTS_PER_INVOCATION,
            );
      // The lanes are declared, with SQLite storage, in every environment.
      expect(section.durable_objects?.bindings).toContainEqual({ name: "WEBHOOK_LANES", class_name: "WebhookLane" });
      expect(section.migrations?.flatMap((m) => m.new_sqlite_classes ?? [])).toContain("WebhookLane");
      expect(consumer.dead_letter_queue).toBe(QUEUES.webhookDeadLetters);
      expect(consumer.max_retries).toBeGreaterThanOrEqual(1);
    },
  );
});
