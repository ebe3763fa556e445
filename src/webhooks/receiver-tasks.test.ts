import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { client, seedProject, testDeps } from "../../test/helpers";
import { createScope } from "../platform/scope";
import { shardOf } from "../platform/shards";
import type { DeliveryMessage } from "./message";
import { createTask, REHAND_AFTER_MS, runSlice } from "./receiver-tasks";
import { changeInDeliveryStores, countInDeliveryStores, rowsInDeliveryStores } from "../../test/delivery-stores";

/**
 * A recovery with no count cap: 50,000 failed deliveries (rows seeded directly), run slice by slice,
 * each slice in a fresh scope as a new alarm after a restart would run it, some slices cut short
 * between their D1 batch and the hand-off to the lane. Every delivery is accounted for, once.
 */

const api = client();
const ORIGIN = "https://hooks.recovery-50k.example";
const N = 50_000;
/**
 * Larger slices than production's (SEND_SLICE 30, TASK_IN_FLIGHT 60), so 50,000 take ~200 slices
 * rather than ~1,700 on the local D1; the statements stay within D1's 100 bound parameters each.
 */
const SIZES = { sendSlice: 250, inFlight: 500 };

beforeEach(() => {
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe("a recovery of 50,000 failed deliveries", () => {
  it("goes on across restarts, in slices, and accounts for every one", async () => {
    const { projectId } = await seedProject(api);
    const base = api.clock.now().getTime() - 3_600_000;
    // 50,000 failed deliveries of an hour, one ms apart, each its own message, an inline body kept.
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?1 - 1)
       INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count,
         last_status_code, created_at, updated_at, completed_at, body, message_id)
       SELECT 'whd_seed' || printf('%08d', i), ?2, 'run_seed' || i, ?3 || '/hook', 0, 9, 'failed', 1, 503,
         ?4 + i, ?4 + i, ?4 + i, '{"n":' || i || '}', 'whd_seed' || printf('%08d', i) FROM n`,
    )
      .bind(N, projectId, ORIGIN, base)
      .run();
    // And three that must not be sent: one delivered since (by a resend), one past the retention, one never stored.
    await env.DB.batch([
      env.DB.prepare(
        "UPDATE webhook_deliveries SET body = NULL, body_purged_at = ?2 WHERE id = 'whd_seed00000007' AND project_id = ?1",
      ).bind(projectId, base),
      env.DB.prepare(
        "UPDATE webhook_deliveries SET body = NULL, last_error = 'enqueue_failed' WHERE id = 'whd_seed00000008' AND project_id = ?1",
      ).bind(projectId),
      env.DB.prepare(
        `INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count,
           created_at, updated_at, resent_from, message_id)
         VALUES ('whd_seedresend', ?1, 'run_seed9', ?2 || '/hook', 0, 9, 'delivered', 1, ?3, ?3, 'whd_seed00000009', 'whd_seed00000009')`,
      ).bind(projectId, ORIGIN, base + N),
    ]);

    const task = await createTask(
      {
        db: createScope(env, createExecutionContext(), testDeps({ now: api.clock.now })).db,
        deps: testDeps({ now: api.clock.now }),
      },
      {
        projectId,
        origin: ORIGIN,
        kind: "recover",
        dryRun: false,
        since: new Date(base),
        until: api.clock.now(),
        createdBy: "test",
      },
    );

    // The lane: takes each slice's messages (and, as a receiver that answers at once, settles them
    // delivered); every 97th hand-off dies before the lane has them, as a restart would cut it.
    const handed: string[] = [];
    let calls = 0;
    let cut = 0;
    const handTo = async (messages: DeliveryMessage[]) => {
      if (++calls % 17 === 0) {
        cut++;
        throw new Error("the isolate was restarted");
      }
      expect(messages.length).toBeLessThanOrEqual(SIZES.sendSlice);
      handed.push(...messages.map((m) => m.messageId!));
      await changeInDeliveryStores(
        "UPDATE webhook_deliveries SET status = 'delivered', attempt_count = 1 WHERE id IN (SELECT value FROM json_each(?))",
        [JSON.stringify(messages.map((m) => m.id))],
      );
    };

    let slices = 0;
    let maxInFlight = 0;
    for (;;) {
      // Each slice in a scope of its own: nothing carried in memory from one to the next.
      const scope = createScope(env, createExecutionContext(), testDeps({ now: api.clock.now }));
      const next = await runSlice(scope, task.id, { handTo, sizes: SIZES });
      slices++;
      const inFlight = await countInDeliveryStores(
        "SELECT count(*) AS n FROM webhook_deliveries WHERE task_id = ? AND status = 'pending'",
        [task.id],
      );
      maxInFlight = Math.max(maxInFlight, inFlight);
      if (next === null) break;
      // A slice that waits: time passes (the cut hand-offs are handed on again after REHAND_AFTER_MS).
      if (next > 0) api.clock.advance(REHAND_AFTER_MS + 1);
      if (slices > 10_000) throw new Error("the recovery does not end");
    }

    const [row] = (
      await env.DB.prepare("SELECT status, counted, sent, expired, unsendable FROM webhook_receiver_tasks WHERE id = ?")
        .bind(task.id)
        .all()
    ).results;
    expect(row).toEqual({ status: "finished", counted: N - 3, sent: N - 3, expired: 1, unsendable: 1 });
    // Summed over the stores (each log, D1): an original's resends are all in its run's shard.
    const resends = { n: 0, originals: 0, delivered: 0 };
    for (const part of await rowsInDeliveryStores<typeof resends>(
      `SELECT count(*) AS n, count(DISTINCT resent_from) AS originals, coalesce(sum(status = 'delivered'), 0) AS delivered
       FROM webhook_deliveries WHERE task_id = ?`,
      [task.id],
    ))
      for (const key of ["n", "originals", "delivered"] as const) resends[key] += part[key];
    // One resend per sendable original, every one delivered: nothing lost, nothing twice.
    expect(resends).toEqual({ n: N - 3, originals: N - 3, delivered: N - 3 });
    // Each in its run's shard (platform/shards.ts), as every delivery's id.
    const sample = await rowsInDeliveryStores<{ id: string; run_id: string }>(
      "SELECT id, run_id FROM webhook_deliveries WHERE task_id = ? ORDER BY id LIMIT 20",
      [task.id],
    );
    expect(sample.length).toBeGreaterThan(0);
    for (const r of sample) expect(shardOf(r.id), r.id).toBe(shardOf(r.run_id));
    expect(new Set(handed).size).toBe(N - 3);
    expect(cut).toBeGreaterThan(0);
    expect(maxInFlight).toBeLessThanOrEqual(SIZES.inFlight);
    // Oldest first: the messages reached the lane in the order of their deliveries, but for those of
    // the cut hand-offs, handed on again later.
    let newest = "";
    let late = 0;
    for (const id of handed) {
      if (id < newest) late++;
      else newest = id;
    }
    expect(late).toBeLessThanOrEqual(cut * SIZES.sendSlice);
  }, 600_000);
});
