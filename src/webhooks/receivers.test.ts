import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { client } from "../../test/helpers";
import { PEER, PEER_MORE, received, receiver } from "../../test/peers";
import { callWith, seedRunnable } from "../../test/runs";
import { until } from "../../test/deliveries";
import { LANE_CONCURRENCY } from "./lane-capacity";
import type { ReceiverTaskJson } from "./receiver-routes";

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

const receiverPath = (app: App, origin: string, rest: string) =>
  `/v2/projects/${app.projectId}/webhook-receivers/${encodeURIComponent(origin)}${rest}`;

/** A run of `app` with its webhook to `endpoint`, its delivery handed to the real lane. */
async function runWith(app: App, endpoint: string, n: number) {
  const response = await callWith(api, {}, `${app.runPath}?webhookEndpoint=${encodeURIComponent(endpoint)}`, {
    method: "POST",
    token: app.token,
    headers: { "Content-Type": "application/json", "X-Webhook-Secret": SECRET },
    body: JSON.stringify({ inputs: { n } }),
  });
  expect(response.status).toBe(200);
  await response.text();
}

async function deliveries(app: App) {
  const { results } = await env.DB.prepare(
    "SELECT id, message_id, status, attempt_count, last_error, task_id, resent_from FROM webhook_deliveries WHERE project_id = ? ORDER BY created_at, id",
  )
    .bind(app.projectId)
    .all<{
      id: string;
      message_id: string;
      status: string;
      attempt_count: number;
      last_error: string | null;
      task_id: string | null;
      resent_from: string | null;
    }>();
  return results;
}

/** Polls the task until it is over; its last state. */
async function followTask(app: App, origin: string, taskId: string, withinMs = 30_000) {
  return until(
    async () =>
      (await api.json<ReceiverTaskJson>(receiverPath(app, origin, `/tasks/${taskId}`), { token: app.token })).body,
    (task) => task.status === "finished" || task.status === "cancelled",
    withinMs,
  );
}

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
    expect(await received(hook.key)).toHaveLength(20);

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
    const counted = await followTask(app, origin, dry.body.task_id);
    expect(counted).toMatchObject({ status: "finished", counted: 20, sent: 0, expired: 0, unsendable: 0 });
    expect(await received(hook.key)).toHaveLength(0);

    const recover = await api.json<ReceiverTaskJson>(receiverPath(app, origin, "/recover"), {
      method: "POST",
      token: app.token,
      body: { since },
    });
    expect(recover.status).toBe(202);
    const done = await followTask(app, origin, recover.body.task_id);
    expect(done).toMatchObject({ status: "finished", counted: 20, sent: 20, delivered: 20, failed: 0, pending: 0 });
    const got = await received(hook.key);
    const expected = failed.map((r) => r.message_id);
    const ids = got.map((r) => r.headers["x-request-id"]!);
    expect([...ids].sort()).toEqual([...expected].sort());
    // Handed to the lane oldest first; the lane has at most LANE_CONCURRENCY requests out at once.
    expect(outOfOrder(ids, expected)).toBeLessThan(LANE_CONCURRENCY);
    // The same message ids, signed afresh.
    expect(got.every((r) => r.signatures?.node && r.signatures.standard)).toBe(true);
    const rows = await deliveries(app);
    expect(rows.filter((r) => r.task_id === recover.body.task_id)).toHaveLength(20);

    const again = await api.json<ReceiverTaskJson>(receiverPath(app, origin, "/recover"), {
      method: "POST",
      token: app.token,
      body: { since },
    });
    expect(again.status).toBe(202);
    expect(await followTask(app, origin, again.body.task_id)).toMatchObject({
      status: "finished",
      counted: 0,
      sent: 0,
    });
    expect(await received(hook.key)).toHaveLength(20);
  }, 60_000);
});
