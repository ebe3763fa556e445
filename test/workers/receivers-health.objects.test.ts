import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { client } from "../helpers";
import { PEER, PEER_OTHER, receiver } from "../peers";
import { seedRunnable } from "../runs";
import { drive, receiverPath, runWithWebhook } from "../webhooks";
import { PROJECT_SHARDS } from "../../src/platform/shards";
import { RECEIVER_CUT_STEP, RECEIVER_ROWS_MAX } from "../../src/usage/deliveries";
import { deliveryLogDb, deliveryLogOfShard } from "../../src/webhooks/log";

/**
 * Receivers' health with the delivery log in the project's objects (`DELIVERY_LOG_STORE=objects`):
 * read from its 8 logs (and D1), its figures are those of the records in the logs, computed here.
 */

const api = client();

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

interface Row {
  endpoint: string;
  status: string;
  attempt_count: number;
  created_at: number;
  completed_at: number | null;
  last_status_code: number | null;
  last_error: string | null;
  message_id: string | null;
  shard: number;
}

/** Every delivery record of `projectId` in its 8 logs, read directly. */
async function logRows(projectId: string): Promise<Row[]> {
  const rows: Row[] = [];
  for (let shard = 0; shard < PROJECT_SHARDS; shard++) {
    const { results } = await deliveryLogDb(env, deliveryLogOfShard(projectId, shard))
      .$client.prepare(
        `SELECT endpoint, status, attempt_count, created_at, completed_at, last_status_code, last_error, message_id
         FROM webhook_deliveries WHERE project_id = ?`,
      )
      .bind(projectId)
      .all<Omit<Row, "shard">>();
    rows.push(...results.map((r) => ({ ...r, shard })));
  }
  return rows;
}

/** Each origin's health, computed from `rows` as the API defines it; busiest first. */
function healthOf(rows: Row[]) {
  const deliveredMessages = new Set(rows.filter((r) => r.status === "delivered").map((r) => r.message_id));
  const recovered = (r: Row) => r.status === "failed" && r.message_id !== null && deliveredMessages.has(r.message_id);
  const byOrigin = Map.groupBy(rows, (r) => new URL(r.endpoint).origin);
  return [...byOrigin]
    .sort(([a, x], [b, y]) => y.length - x.length || (a < b ? -1 : 1))
    .map(([origin, of]) => {
      const delivered = of.filter((r) => r.status === "delivered");
      const failures = of.filter((r) => r.status === "failed" && !recovered(r));
      const settled = of.filter((r) => r.status === "delivered" || r.status === "failed");
      const times = delivered.map((r) => (r.completed_at ?? r.created_at) - r.created_at).sort((a, b) => a - b);
      const last = failures.reduce<Row | null>(
        (a, b) => (a === null || (b.completed_at ?? b.created_at) > (a.completed_at ?? a.created_at) ? b : a),
        null,
      );
      return {
        origin,
        delivered: delivered.length,
        failed: failures.length,
        recovered: of.filter(recovered).length,
        held: of.filter((r) => r.status === "held").length,
        pending: of.filter((r) => r.status === "pending").length,
        retried_share: settled.length === 0 ? 0 : settled.filter((r) => r.attempt_count > 1).length / settled.length,
        p95_run_to_received_ms: times.length === 0 ? null : times[Math.ceil(0.95 * times.length) - 1],
        last_failure:
          last === null
            ? null
            : {
                at: new Date(last.completed_at ?? last.created_at).toISOString(),
                reason: last.last_error ?? `the receiver answered ${last.last_status_code}`,
              },
      };
    });
}

/** Rows of D1's delivery records of `projectId`. */
const d1Rows = async (projectId: string) =>
  (await env.DB.prepare("SELECT count(*) AS n FROM webhook_deliveries WHERE project_id = ?")
    .bind(projectId)
    .first<{ n: number }>())!.n;

type HealthJson = ReturnType<typeof healthOf>[number] & {
  state: string;
  state_cause: string | null;
  failing_since: string | null;
  concurrency: number;
};

/** A receiver's figures in an answer, without its state and settings. */
const figures = ({ state: _s, state_cause: _c, failing_since: _f, concurrency: _k, ...h }: HealthJson) => h;

describe("DELIVERY_LOG_STORE=objects: receivers' health read from the project's logs", () => {
  it("runs to two receiver origins, delivered after various delays or failed: the figures of the records in the logs", async () => {
    const app = await seedRunnable(api);
    const ok = await receiver([{ status: 200 }]);
    const retried = await receiver([{ status: 404 }, { status: 200 }]);
    const refused = await receiver([{ status: 400 }]);
    const okOther = await receiver([{ status: 200 }], undefined, PEER_OTHER);
    const refusedOther = await receiver([{ status: 400 }], undefined, PEER_OTHER);
    // [receiver, ms between the run's record and its delivery's first attempt]
    const plan: [string, number][] = [
      ...Array.from({ length: 12 }, (_, i): [string, number] => [ok.url, 40 + ((i * 379) % 1_300)]),
      [retried.url, 250],
      [refused.url, 90],
      [refused.url, 700],
      ...Array.from({ length: 6 }, (_, i): [string, number] => [okOther.url, 10 + i * i * 53]),
      [refusedOther.url, 120],
    ];
    for (const [url, delay] of plan) {
      const run = await runWithWebhook(api, app, url);
      expect(run.response.status).toBe(200);
      api.clock.advance(delay);
      await drive(api, run.messages[0]);
      api.clock.advance(1_000);
    }

    const rows = await logRows(app.projectId);
    expect(rows).toHaveLength(plan.length);
    // Spread over several logs: the figures are merged, not one log's.
    expect(new Set(rows.map((r) => r.shard)).size).toBeGreaterThan(2);
    const expected = healthOf(rows);
    expect(expected.map((h) => h.origin)).toEqual([PEER, PEER_OTHER].map((u) => new URL(u).origin));
    expect(expected[0]).toMatchObject({ delivered: 13, failed: 2 });
    expect(expected[0]!.retried_share).toBeGreaterThan(0);
    expect(expected[1]).toMatchObject({ delivered: 6, failed: 1 });

    const list = await api.json<{ data: HealthJson[] }>(`/v2/projects/${app.projectId}/webhook-receivers`, {
      token: app.token,
    });
    expect(list.status).toBe(200);
    expect(list.body.data.map(figures)).toEqual(expected);

    // One receiver's alone says the same.
    const other = await api.json<HealthJson>(receiverPath(app, new URL(PEER_OTHER).origin), { token: app.token });
    expect(other.status).toBe(200);
    expect(other.body).toMatchObject(expected[1]!);

    expect(await d1Rows(app.projectId)).toBe(0);
  });

  it("a range busier than the cap: its newest deliveries across the logs, within the cap, and the p95 exact over them", async () => {
    const app = await seedRunnable(api);
    const start = api.clock.now().getTime() - 3_600_000;
    const total = RECEIVER_ROWS_MAX + 12_000;
    // Written by each log itself, unevenly: log 0 holds a quarter more than the others.
    for (let shard = 0; shard < PROJECT_SHARDS; shard++)
      await deliveryLogDb(env, deliveryLogOfShard(app.projectId, shard))
        .$client.prepare(
          `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?2 - 1)
           INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count,
                                           last_status_code, created_at, updated_at, completed_at)
           SELECT printf('whd_busy%08d', i), ?1, printf('run_busy%08d', i),
                  'https://r' || (i % 3) || '.example.com/hook', 1, 10,
                  CASE WHEN i % 7 = 0 THEN 'failed' WHEN i % 11 = 1 THEN 'pending' ELSE 'delivered' END,
                  CASE WHEN i % 4 = 0 THEN 2 ELSE 1 END,
                  CASE WHEN i % 7 = 0 THEN 500 + i % 3 ELSE NULL END,
                  ?3 + i, ?3 + i, CASE WHEN i % 11 = 1 THEN NULL ELSE ?3 + i + (i % 97) * 10 + i % 13 END
           FROM n WHERE (CASE WHEN i % 4 = 0 THEN 0 ELSE i % 8 END) = ?4`,
        )
        .bind(app.projectId, total, start, shard)
        .run();

    const res = await api.json<{ data: HealthJson[] }>(`/v2/projects/${app.projectId}/webhook-receivers`, {
      token: app.token,
    });
    expect(res.status).toBe(200);
    const counted = res.body.data.reduce((sum, h) => sum + h.delivered + h.failed + h.recovered + h.pending, 0);
    expect(counted).toBeLessThanOrEqual(RECEIVER_ROWS_MAX);
    expect(counted).toBeGreaterThan(RECEIVER_ROWS_MAX - 2 * RECEIVER_CUT_STEP * (PROJECT_SHARDS + 1));

    // The deliveries counted are the newest `counted` of all the logs': their figures, computed here.
    const rows = (await logRows(app.projectId)).sort((a, b) => b.created_at - a.created_at);
    expect(rows).toHaveLength(total);
    const expected = healthOf(rows.slice(0, counted));
    expect(res.body.data.map(figures)).toEqual(expected);
    expect(await d1Rows(app.projectId)).toBe(0);
  }, 120_000);
});
