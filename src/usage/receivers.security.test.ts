import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { callWith, seedRunnable } from "../../test/runs";
import { RECEIVER_ORIGINS_MAX } from "./deliveries";

/** The receivers' health against a project whose deliveries would not fit a Worker (issue 33, finding 9). */

const api = client();
const DELIVERIES = 50_000;
const ORIGINS = 4;

/** A D1 binding that keeps the size (as JSON) of the largest answer any statement returned to the Worker. */
function measuringD1(real: D1Database) {
  let largest = 0;
  const statement = (st: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(st, {
      get(target, prop) {
        const value = Reflect.get(target, prop) as unknown;
        if (prop === "bind") return (...args: unknown[]) => statement(target.bind(...args));
        if (prop === "all" || prop === "raw" || prop === "first" || prop === "run")
          return async (...args: unknown[]) => {
            const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            largest = Math.max(largest, JSON.stringify(result ?? null).length);
            return result;
          };
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  const db = new Proxy(real, {
    get(target, prop) {
      if (prop === "prepare") return (query: string) => statement(target.prepare(query));
      const value = Reflect.get(target, prop) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { db, largest: () => largest };
}

/** What the deliveries below are, row `i` of them (the same formulas as the SQL that writes them). */
const statusOf = (i: number) => (i % 5 === 0 ? "failed" : i % 10 === 1 ? "pending" : "delivered");

describe("attack: the receivers' health read every delivery into the Worker (33.8)", () => {
  it("answers 50,000 deliveries with 2,048-character endpoints from one row per origin: exact figures, never the deliveries in memory", async () => {
    const app = await seedRunnable(api);
    const start = api.clock.now().getTime() - 3_600_000;
    // Written by D1 itself: 50,000 rows, ~100 MB of endpoints, over four receiver origins.
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?2 - 1)
       INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count,
                                       last_status_code, created_at, updated_at, completed_at)
       SELECT printf('whd_flood%08d', i), ?1, printf('run_flood%08d', i),
              'https://r' || (i % ${ORIGINS}) || '.example.com/' || hex(zeroblob(1012)), 1, 10,
              CASE WHEN i % 5 = 0 THEN 'failed' WHEN i % 10 = 1 THEN 'pending' ELSE 'delivered' END,
              CASE WHEN i % 3 = 0 THEN 2 ELSE 1 END,
              CASE WHEN i % 5 = 0 THEN 500 + i % ${ORIGINS} ELSE NULL END,
              ?3 + i, ?3 + i, CASE WHEN i % 10 = 1 THEN NULL ELSE ?3 + i + (i % 97) * 10 END
       FROM n`,
    )
      .bind(app.projectId, DELIVERIES, start)
      .run();

    const d1 = measuringD1(env.DB);
    const res = await callWith(api, { DB: d1.db }, `/v2/projects/${app.projectId}/webhook-receivers`, {
      headers: { Authorization: `Bearer ${app.token}` },
    });
    expect(res.status).toBe(200);
    const { data } = (await res.json()) as { data: Record<string, unknown>[] };

    // The figures, computed here from the same formulas.
    const expected = Array.from({ length: ORIGINS }, (_, o) => {
      const rows = Array.from({ length: DELIVERIES }, (_, i) => i).filter((i) => i % ORIGINS === o);
      const delivered = rows.filter((i) => statusOf(i) === "delivered");
      const failed = rows.filter((i) => statusOf(i) === "failed");
      const settled = rows.filter((i) => statusOf(i) !== "pending");
      const times = delivered.map((i) => (i % 97) * 10).sort((a, b) => a - b);
      const last = failed.reduce((a, b) => (b + (b % 97) * 10 > a + (a % 97) * 10 ? b : a));
      return {
        origin: `https://r${o}.example.com`,
        state: "active",
        state_cause: null,
        failing_since: null,
        delivered: delivered.length,
        failed: failed.length,
        recovered: 0,
        held: 0,
        pending: rows.length - settled.length,
        retried_share: settled.filter((i) => i % 3 === 0).length / settled.length,
        p95_run_to_received_ms: times[Math.ceil(0.95 * times.length) - 1],
        last_failure: {
          at: new Date(start + last + (last % 97) * 10).toISOString(),
          reason: `the receiver answered ${500 + o}`,
        },
        concurrency: 6,
      };
    });
    expect(new Set(data.map((h) => h.origin))).toEqual(new Set(expected.map((h) => h.origin)));
    for (const h of expected) expect(data.find((d) => d.origin === h.origin)).toEqual(h);
    // The Worker held one row per origin: a few kilobytes, never the 100 MB of deliveries.
    expect(d1.largest()).toBeLessThan(RECEIVER_ORIGINS_MAX * 2_000);
  }, 120_000);
});
