import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { client } from "../../test/helpers";
import { PEER, PEER_MORE, received, receiver } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import { followTask, receiverPath, runToLane } from "../../test/webhooks";
import { until } from "../../test/deliveries";
import { LANE_CONCURRENCY } from "./lane-capacity";
import type { ReceiverTaskJson } from "./receiver-routes";
import { projectDeliveries } from "../../test/delivery-stores";

/**
 * A receiver's controls end to end, on the real lanes and task objects (their alarms deliver and run
 * the slices) and a real receiver (test/global/peers.mjs): recover, pause and resume, a receiver that
 * says stop, the alert endpoint.
 */

const api = client();
const SECRET = "receiver-controls-secret-0123";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

type App = Awaited<ReturnType<typeof seedRunnable>>;

/** A run of `app` with its webhook to `endpoint`, its delivery handed to the real lane. */
const runWith = (app: App, endpoint: string, n: number) => runToLane(api, app, endpoint, SECRET, n);

/** The project's deliveries, wherever they are recorded, in the order they were recorded. */
const deliveries = (app: App) => projectDeliveries(app.projectId);

/**
 * The message ids a receiver got, each once (an attempt that timed out on this busy machine may be
 * retried after the receiver took it: at least once, as the spec says), in order of first arrival.
 */
const firstArrivals = (got: { headers: Record<string, string> }[]) => [
  ...new Set(got.map((r) => r.headers["x-request-id"]!)),
];

/** Each received id's distance from its place in `expected`: handed on in order, at most LANE_CONCURRENCY in flight. */
function outOfOrder(got: string[], expected: string[]) {
  return Math.max(...got.map((id, i) => Math.abs(expected.indexOf(id) - i)));
}

describe("recover", () => {
  it("a receiver that refused for 60 s gets every missed result, in order, after one recover (a dry run counts them first); a second recover sends nothing", async () => {
    const app = await seedRunnable(api);
    // Its deploy is broken: every delivery is refused (503, failed at once).
    const hook = await receiver([{ status: 503 }], SECRET, PEER_MORE[0]);
    const origin = new URL(hook.url).origin;
    const since = api.clock.now().toISOString();
    for (let i = 0; i < 20; i++) {
      await runWith(app, hook.url, i);
      api.clock.advance(3_000); // 20 runs over 60 s
    }
    const failed = await until(
      () => deliveries(app),
      (rows) => rows.length === 20 && rows.every((r) => r.status === "failed"),
      20_000,
    );
    expect(failed.map((r) => r.status)).toEqual(Array(20).fill("failed"));
    expect(firstArrivals(await received(hook.key))).toHaveLength(20);

    // The receiver is back (a new scenario: its log starts empty).
    await fetch(`${PEER}/scenarios/${hook.key}`, {
      method: "POST",
      body: JSON.stringify({ responses: [{ status: 200 }], secret: SECRET }),
    });

    const dry = await api.json<ReceiverTaskJson>(receiverPath(app, origin, "/recover"), {
      method: "POST",
      token: app.token,
      body: { since, dry_run: true },
    });
    expect(dry.status).toBe(202);
    expect(dry.body).toMatchObject({ kind: "recover", status: "counting", dry_run: true });
    const counted = await followTask(api, app, origin, dry.body.task_id);
    expect(counted).toMatchObject({ status: "finished", counted: 20, sent: 0, expired: 0, unsendable: 0 });
    expect(await received(hook.key)).toHaveLength(0);

    const recover = await api.json<ReceiverTaskJson>(receiverPath(app, origin, "/recover"), {
      method: "POST",
      token: app.token,
      body: { since },
    });
    expect(recover.status).toBe(202);
    const done = await followTask(api, app, origin, recover.body.task_id);
    expect(done).toMatchObject({ status: "finished", counted: 20, sent: 20, delivered: 20, failed: 0, pending: 0 });
    const got = await received(hook.key);
    const expected = failed.map((r) => r.message_id);
    const ids = firstArrivals(got);
    expect([...ids].sort()).toEqual([...expected].sort());
    // Handed to the lane oldest first; the lane has at most LANE_CONCURRENCY requests out at once.
    expect(outOfOrder(ids, expected)).toBeLessThan(LANE_CONCURRENCY);
    // The same message ids, signed afresh.
    expect(got.every((r) => r.signatures?.node && r.signatures.standard)).toBe(true);
    const rows = await deliveries(app);
    expect(rows.filter((r) => r.task_id === recover.body.task_id)).toHaveLength(20);

    // Receivers' health counts the originals as recovered, not failed. (The task's object runs on the
    // real clock, this client on a fake one: the range reaches the resends' real times.)
    const to = new Date(Date.now() + 3_600_000).toISOString();
    const health = await api.json<{ data: Record<string, unknown>[] }>(
      `/v2/projects/${app.projectId}/webhook-receivers?from=${encodeURIComponent(since)}&to=${encodeURIComponent(to)}`,
      { token: app.token },
    );
    expect(health.body.data).toEqual([
      expect.objectContaining({ origin, state: "active", delivered: 20, failed: 0, recovered: 20, held: 0 }),
    ]);
    // The list filters by status, receiver origin and time.
    const list = (query: string) =>
      api.json<{ data: { delivery_id: string; status: string }[] }>(
        `/v2/projects/${app.projectId}/webhook-deliveries?limit=100&${query}`,
        { token: app.token },
      );
    const failedOnes = await list(`status=failed&origin=${encodeURIComponent(origin)}`);
    expect(failedOnes.body.data.map((d) => d.delivery_id).sort()).toEqual(failed.map((r) => r.id).sort());
    expect((await list(`status=delivered&origin=${encodeURIComponent(origin)}`)).body.data).toHaveLength(20);
    expect((await list(`origin=${encodeURIComponent("https://elsewhere.example.com")}`)).body.data).toHaveLength(0);
    const firstMinute = await list(
      `status=failed&from=${encodeURIComponent(since)}&to=${encodeURIComponent(new Date(Date.parse(since) + 30_000).toISOString())}`,
    );
    expect(firstMinute.body.data).toHaveLength(10);
    expect((await list("origin=not-an-origin")).status).toBe(400);

    const again = await api.json<ReceiverTaskJson>(receiverPath(app, origin, "/recover"), {
      method: "POST",
      token: app.token,
      body: { since },
    });
    expect(again.status).toBe(202);
    const before = (await received(hook.key)).length;
    expect(await followTask(api, app, origin, again.body.task_id)).toMatchObject({
      status: "finished",
      counted: 0,
      sent: 0,
    });
    expect(await received(hook.key)).toHaveLength(before);
  }, 60_000);
});

/** Waits until the project's deliveries satisfy `done`. */
const deliveriesUntil = (
  app: App,
  done: (rows: Awaited<ReturnType<typeof deliveries>>) => boolean,
  withinMs = 15_000,
) => until(() => deliveries(app), done, withinMs);

describe("pause and resume", () => {
  it("a paused receiver gets nothing (its deliveries are held: stored, no attempt counted) until resume, then everything held, in order", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }], SECRET, PEER_MORE[1]);
    const origin = new URL(hook.url).origin;
    await runWith(app, hook.url, 0);
    api.clock.advance(1_000);
    await deliveriesUntil(app, (rows) => rows[0]?.status === "delivered");

    const paused = await api.json(receiverPath(app, origin, "/pause"), { method: "POST", token: app.token });
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ origin, state: "paused", state_cause: "paused" });
    // The pause is told to the receiver's lane before its answer: what the lane takes from now on is held.
    for (let i = 1; i <= 5; i++) {
      await runWith(app, hook.url, i);
      api.clock.advance(1_000);
    }
    const held = await deliveriesUntil(app, (rows) => rows.filter((r) => r.status === "held").length === 5);
    expect(held.slice(1).map((r) => [r.status, r.attempt_count, r.last_error])).toEqual(
      Array(5).fill(["held", 0, "receiver_paused"]),
    );
    expect(firstArrivals(await received(hook.key))).toHaveLength(1);
    // The list shows them held.
    const list = await api.json<{ data: { status: string }[] }>(`/v2/projects/${app.projectId}/webhook-deliveries`, {
      token: app.token,
    });
    expect(list.body.data.filter((d) => d.status === "held")).toHaveLength(5);
    const health = await api.json<{ data: Record<string, unknown>[] }>(
      `/v2/projects/${app.projectId}/webhook-receivers`,
      {
        token: app.token,
      },
    );
    expect(health.body.data).toEqual([
      expect.objectContaining({ origin, state: "paused", state_cause: "paused", delivered: 1, held: 5 }),
    ]);

    const resumed = await api.json<{ receiver: { state: string }; task: ReceiverTaskJson }>(
      receiverPath(app, origin, "/resume"),
      { method: "POST", token: app.token },
    );
    expect(resumed.status).toBe(200);
    expect(resumed.body.receiver.state).toBe("active");
    expect(resumed.body.task).toMatchObject({ kind: "release", status: "sending" });
    const done = await followTask(api, app, origin, resumed.body.task.task_id);
    expect(done).toMatchObject({ status: "finished", sent: 5, delivered: 5, failed: 0 });
    const ids = firstArrivals(await received(hook.key)).slice(1);
    const expected = held.slice(1).map((r) => r.message_id);
    expect([...ids].sort()).toEqual([...expected].sort());
    expect(outOfOrder(ids, expected)).toBeLessThan(LANE_CONCURRENCY);
    // Each held delivery was sent as itself (no resend record).
    const rows = await deliveries(app);
    expect(rows.map((r) => [r.status, r.resent_from])).toEqual(Array(6).fill(["delivered", null]));
  }, 60_000);

  it("an unknown origin is a 404 problem, for every control", async () => {
    const app = await seedRunnable(api);
    for (const [rest, method, body] of [
      ["/pause", "POST", undefined],
      ["/resume", "POST", undefined],
      ["/recover", "POST", { since: api.clock.now().toISOString() }],
      ["/tasks/wrt_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c", "GET", undefined],
    ] as const) {
      const answer = await api.json<{ code: string }>(receiverPath(app, "https://nobody.example.com", rest), {
        method,
        token: app.token,
        body,
      });
      expect(answer.status).toBe(404);
      expect(answer.headers.get("content-type")).toContain("application/problem+json");
    }
  });
});

describe("receivers that say stop", () => {
  it("a receiver answering 410 gets no further attempts (later deliveries held, cause given, in the audit log) and the alert endpoint receives one signed webhook.receiver.disabled", async () => {
    const app = await seedRunnable(api);
    const alerts = await receiver([{ status: 204 }], SECRET);
    const settings = await api.json(`/v2/projects/${app.projectId}/webhook-settings`, {
      method: "PATCH",
      token: app.token,
      body: { alert_endpoint: alerts.url, alert_secret: SECRET },
    });
    expect(settings.status).toBe(200);
    expect(settings.body).toEqual({ alert_endpoint: alerts.url, alert_signed: true, auto_recover_hours: null });

    const hook = await receiver([{ status: 410 }], SECRET, PEER_MORE[2]);
    const origin = new URL(hook.url).origin;
    await runWith(app, hook.url, 0);
    const gone = await deliveriesUntil(app, (rows) => rows.some((r) => r.status === "failed"));
    expect(gone.find((r) => r.status === "failed")).toMatchObject({ attempt_count: 1 });
    const state = await env.DB.prepare(
      "SELECT state, state_cause FROM webhook_receivers WHERE project_id = ? AND origin = ?",
    )
      .bind(app.projectId, origin)
      .first();
    expect(state).toEqual({ state: "disabled", state_cause: "the receiver answered 410 Gone" });

    for (let i = 1; i <= 3; i++) await runWith(app, hook.url, i);
    const rows = await deliveriesUntil(app, (all) => all.filter((r) => r.status === "held").length === 3);
    expect(rows.filter((r) => r.status === "held").map((r) => [r.attempt_count, r.last_error])).toEqual(
      Array(3).fill([0, "receiver_disabled"]),
    );
    expect(await received(hook.key)).toHaveLength(1);

    const events = await until(
      () => received(alerts.key),
      (got) => got.some((r) => r.body?.includes("webhook.receiver.disabled")),
      10_000,
    );
    const disabled = events.filter((r) => JSON.parse(r.body!).type === "webhook.receiver.disabled");
    expect(disabled).toHaveLength(1);
    expect(disabled[0]!.signatures).toMatchObject({ node: true, standard: true });
    expect(JSON.parse(disabled[0]!.body!)).toMatchObject({
      type: "webhook.receiver.disabled",
      project_id: app.projectId,
      data: { origin, cause: "the receiver answered 410 Gone" },
    });

    const audit = await api.json<{ data: { action: string; target: { id: string }; details: unknown }[] }>(
      `/v2/projects/${app.projectId}/audit-log?action=webhook_receiver.disable`,
      { token: app.token },
    );
    expect(audit.body.data).toHaveLength(1);
    expect(audit.body.data[0]).toMatchObject({
      target: { id: origin },
      details: { cause: "the receiver answered 410 Gone" },
    });

    // Resume re-enables it and sends what was held (it still answers 410: disabled again, once more in the log).
    const resumed = await api.json<{ receiver: { state: string } }>(receiverPath(app, origin, "/resume"), {
      method: "POST",
      token: app.token,
    });
    expect(resumed.body.receiver.state).toBe("active");
  }, 60_000);
});

describe("automatic recovery", () => {
  it("is off by default; with auto_recover_hours, a failing receiver that answers 2xx again gets its failed deliveries recovered by itself", async () => {
    // The lanes judge "the last N hours" on the real clock: the runs are made on it too.
    api.clock.set(new Date(Date.now() - 60_000).toISOString());
    const app = await seedRunnable(api);
    const off = await api.json(`/v2/projects/${app.projectId}/webhook-settings`, { token: app.token });
    expect(off.body).toEqual({ alert_endpoint: null, alert_signed: false, auto_recover_hours: null });
    const on = await api.json(`/v2/projects/${app.projectId}/webhook-settings`, {
      method: "PATCH",
      token: app.token,
      body: { auto_recover_hours: 1 },
    });
    expect(on.body).toMatchObject({ auto_recover_hours: 1 });

    const hook = await receiver(
      [{ status: 503 }, { status: 503 }, { status: 503 }, { status: 200 }],
      SECRET,
      PEER_MORE[1],
    );
    for (let i = 0; i < 3; i++) {
      await runWith(app, hook.url, i);
      api.clock.advance(1_000);
      await deliveriesUntil(app, (rows) => rows.filter((r) => r.status === "failed").length === i + 1);
    }
    // The receiver is back: the next delivery is a 2xx, and the three failed ones follow by themselves.
    await runWith(app, hook.url, 3);
    const rows = await deliveriesUntil(
      app,
      (all) => all.filter((r) => r.task_id !== null && r.status === "delivered").length === 3,
      20_000,
    );
    const resent = rows.filter((r) => r.task_id !== null);
    expect(resent.map((r) => r.status)).toEqual(["delivered", "delivered", "delivered"]);
    const task = await env.DB.prepare("SELECT created_by, kind FROM webhook_receiver_tasks WHERE id = ?")
      .bind(resent[0]!.task_id)
      .first();
    expect(task).toEqual({ created_by: "auto-recovery", kind: "recover" });
  }, 60_000);
});

describe("scopes", () => {
  it("recover, pause, resume and tasks need deliveries:write (403 problem with deliveries:read alone); the settings' read needs deliveries:read", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }]);
    await runWith(app, hook.url, 0);
    const origin = new URL(hook.url).origin;
    const expires = new Date(api.clock.now().getTime() + 86_400_000).toISOString();
    const reader = await api.json<{ token: string }>(`/v2/projects/${app.projectId}/service-accounts`, {
      method: "POST",
      body: { name: "reader", expires_at: expires, scopes: ["deliveries:read"] },
    });
    const token = reader.body.token;
    for (const [rest, method, body] of [
      ["/pause", "POST", undefined],
      ["/resume", "POST", undefined],
      ["/recover", "POST", { since: api.clock.now().toISOString(), dry_run: true }],
      ["/tasks/wrt_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c", "GET", undefined],
      ["/tasks/wrt_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c", "DELETE", undefined],
    ] as const) {
      const answer = await api.json<{ code: string }>(receiverPath(app, origin, rest), { method, token, body });
      expect([rest, method, answer.status, answer.body.code]).toEqual([rest, method, 403, "insufficient_scope"]);
    }
    expect((await api.json(`/v2/projects/${app.projectId}/webhook-settings`, { token })).status).toBe(200);
    const write = await api.json(`/v2/projects/${app.projectId}/webhook-settings`, {
      method: "PATCH",
      token,
      body: { auto_recover_hours: 2 },
    });
    expect(write.status).toBe(403);
    // A window wholly past the body retention is a 422 problem.
    const old = await api.json<{ code: string }>(receiverPath(app, origin, "/recover"), {
      method: "POST",
      token: app.token,
      body: { since: "2026-01-01T00:00:00Z", until: "2026-01-02T00:00:00Z" },
    });
    expect([old.status, old.body.code]).toEqual([422, "window_past_retention"]);
  });
});
