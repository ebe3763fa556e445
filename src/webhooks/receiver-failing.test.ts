import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { until } from "../../test/deliveries";
import { createExecutionContext, createScheduledController } from "cloudflare:test";
import { client, testDeps } from "../../test/helpers";
import { CRONS } from "../platform/triggers";
import { createWorker } from "../worker";
import { PEER, PEER_MORE, receiver } from "../../test/peers";
import { callWith, seedRunnable } from "../../test/runs";
import { countInDeliveryStores, rowsInDeliveryStores } from "../../test/delivery-stores";

/**
 * A receiver whose deliveries fail is said at the top of every project page (issue 42, "the customer
 * is told"), and stops being said once one is delivered: the mark its lanes write on each change
 * (`failing_since`), on the real lanes and a real receiver (test/global/peers.mjs).
 */

const api = client();
const HOUR = 3_600_000;

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

type App = Awaited<ReturnType<typeof seedRunnable>>;

async function runWith(app: App, endpoint: string) {
  const response = await callWith(api, {}, `${app.runPath}?webhookEndpoint=${encodeURIComponent(endpoint)}`, {
    method: "POST",
    token: app.token,
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ inputs: {} }),
  });
  expect(response.status).toBe(200);
  await response.text();
}

const failingSince = async (app: App, origin: string) =>
  (
    await env.DB.prepare("SELECT failing_since AS at FROM webhook_receivers WHERE project_id = ? AND origin = ?")
      .bind(app.projectId, origin)
      .first<{ at: number | null }>()
  )?.at ?? null;

describe("a failing receiver", () => {
  it("is marked once its delivery fails, said at the top of the project's pages and in the API, and cleared when one is delivered", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 503 }], undefined, PEER_MORE[1]);
    const origin = new URL(hook.url).origin;
    const v = visitor(api);
    await v.signIn();
    const runsPage = `/dashboard/projects/${app.projectId}/runs`;
    expect(text((await v.get(runsPage)).html)).not.toContain("is failing");

    await runWith(app, hook.url);
    const marked = await until(
      () => failingSince(app, origin),
      (at) => at !== null,
      20_000,
    );
    const settled = await rowsInDeliveryStores<{ status: string; completed_at: number }>(
      "SELECT status, completed_at FROM webhook_deliveries WHERE project_id = ?",
      [app.projectId],
    );
    expect(settled).toEqual([expect.objectContaining({ status: "failed" })]);

    const page = await v.get(runsPage);
    expect(text(page.html)).toContain(`Webhook receiver ${origin} is failing: its deliveries have failed since`);
    // What to do is one click away: its failed deliveries, and the recovery.
    expect(page.html).toContain(
      `href="/dashboard/projects/${app.projectId}/webhook-deliveries?status=failed&amp;origin=${encodeURIComponent(origin)}"`,
    );
    const health = await api.json<{ data: { origin: string; state: string; failing_since: string | null }[] }>(
      `/v2/projects/${app.projectId}/webhook-receivers`,
      { token: app.token },
    );
    expect(health.body.data).toEqual([
      expect.objectContaining({ origin, state: "active", failing_since: new Date(marked!).toISOString() }),
    ]);

    // A second failure keeps the first one's time.
    await runWith(app, hook.url);
    await until(
      () =>
        countInDeliveryStores(
          "SELECT count(*) AS n FROM webhook_deliveries WHERE project_id = ? AND status = 'failed'",
          [app.projectId],
        ),
      (n) => n === 2,
      20_000,
    );
    expect(await failingSince(app, origin)).toBe(marked);

    // The receiver is back: its next delivery clears the mark, and the banner goes.
    await fetch(`${PEER}/scenarios/${hook.key}`, {
      method: "POST",
      body: JSON.stringify({ responses: [{ status: 200 }] }),
    });
    await runWith(app, hook.url);
    await until(
      () => failingSince(app, origin),
      (at) => at === null,
      20_000,
    );
    expect(text((await v.get(runsPage)).html)).not.toContain("is failing");
  }, 60_000);

  it("is disabled by the */30 cron once marked failing for WEBHOOK_RECEIVER_DISABLE_AFTER_HOURS (24), with an audit entry; not sooner, and not one resumed since", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 503 }], undefined, PEER_MORE[2]);
    const origin = new URL(hook.url).origin;
    await runWith(app, hook.url);
    const marked = (await until(
      () => failingSince(app, origin),
      (at) => at !== null,
      20_000,
    ))!;
    // Another receiver of the project, failing as long, but resumed an hour before the cron: a span anew.
    const resumed = "https://resumed.example";
    await env.DB.prepare(
      `INSERT INTO webhook_receivers (project_id, origin, concurrency, state, state_changed_at, failing_since, updated_at)
       VALUES (?, ?, 6, 'active', ?, ?, ?)`,
    )
      .bind(app.projectId, resumed, marked + 23 * HOUR, marked - 48 * HOUR, marked)
      .run();
    const cron = (at: number) =>
      createWorker(testDeps({ now: () => new Date(at) })).scheduled(
        createScheduledController({ cron: CRONS.domainValidation }),
        env,
        createExecutionContext(),
      );
    const stateOf = (o: string) =>
      env.DB.prepare("SELECT state, state_cause FROM webhook_receivers WHERE project_id = ? AND origin = ?")
        .bind(app.projectId, o)
        .first<{ state: string; state_cause: string | null }>();

    await cron(marked + 24 * HOUR - 60_000);
    expect(await stateOf(origin)).toEqual({ state: "active", state_cause: null });
    await cron(marked + 24 * HOUR + 1_000);
    expect(await stateOf(origin)).toEqual({ state: "disabled", state_cause: "every delivery failed for 24 hours" });
    expect(await stateOf(resumed)).toEqual({ state: "active", state_cause: null });
    const audit = await env.DB.prepare(
      "SELECT action, target_id FROM audit_log WHERE project_id = ? AND action = 'webhook_receiver.disable'",
    )
      .bind(app.projectId)
      .all();
    expect(audit.results).toEqual([{ action: "webhook_receiver.disable", target_id: origin }]);
  }, 60_000);
});
