import { and, count, eq, gte, inArray, isNull, lt, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { WEBHOOK_ORIGIN_SQL, webhookDeliveries as d, webhookReceivers } from "../db/schema";
import type { RunDelivery } from "./routes";
import { eachLimited } from "../platform/concurrency";
import type { Scope } from "../platform/scope";
import { shardOf } from "../platform/shards";
import { logDbOf, projectLogDbs } from "../webhooks/log";

/**
 * What usage reads of the webhook delivery records (D1, written by the delivery pipeline): each run's
 * delivery, deliveries per interval, and each receiver origin's health.
 */

/** D1 binds at most 100 parameters per statement; the project id takes one. */
const IDS_PER_QUERY = 90;
/** Deliveries one receivers' health answer reads at most (newest first); a busier range is summarised from these. */
export const RECEIVER_ROWS_MAX = 50_000;

/**
 * The delivery of each run in `runIds` (the first one made; a resend is a delivery of its own): in each
 * run's log (its shard: webhooks/log.ts), then in D1 for those not found there (recorded before the logs).
 */
export async function runDeliveries(
  scope: Pick<Scope, "env" | "db" | "config">,
  projectId: string,
  runIds: string[],
): Promise<Map<string, RunDelivery>> {
  if (scope.config.deliveryLogStore !== "objects") return runDeliveriesIn(scope.db, projectId, runIds);
  const byRun = new Map<string, RunDelivery>();
  for (const ids of Map.groupBy(runIds, shardOf).values())
    for (const [runId, delivery] of await runDeliveriesIn(logDbOf(scope, projectId, ids[0]!), projectId, ids))
      byRun.set(runId, delivery);
  const missing = runIds.filter((id) => !byRun.has(id));
  for (const [runId, delivery] of await runDeliveriesIn(scope.db, projectId, missing)) byRun.set(runId, delivery);
  return byRun;
}

async function runDeliveriesIn(db: Database, projectId: string, runIds: string[]): Promise<Map<string, RunDelivery>> {
  const byRun = new Map<string, RunDelivery>();
  for (let i = 0; i < runIds.length; i += IDS_PER_QUERY) {
    const rows = await db
      .select({ runId: d.runId, id: d.id, status: d.status, attempts: d.attemptCount })
      .from(d)
      .where(
        and(eq(d.projectId, projectId), inArray(d.runId, runIds.slice(i, i + IDS_PER_QUERY)), isNull(d.resentFrom)),
      )
      .orderBy(d.id);
    for (const row of rows)
      if (!byRun.has(row.runId))
        byRun.set(row.runId, { delivery_id: row.id, status: row.status, attempts: row.attempts });
  }
  return byRun;
}

/** Settled deliveries per interval of [from, to), by the time of their run, indexed from `from`: each store's counts added. */
export async function deliveryCounts(
  scope: Pick<Scope, "env" | "db" | "config">,
  projectId: string,
  q: { from: number; to: number; step: number; appName?: string },
) {
  const points: { delivered: number; failed: number }[] = [];
  const asked = await eachLimited(projectLogDbs(scope, projectId), 6, async (db) => {
    for (const [i, point] of (await deliveryCountsIn(db, projectId, q)).entries()) {
      if (!point) continue;
      const sum = (points[i] ??= { delivered: 0, failed: 0 });
      sum.delivered += point.delivered;
      sum.failed += point.failed;
    }
  });
  const failed = asked.find((result) => result.status === "rejected");
  if (failed) throw failed.reason;
  return points;
}

async function deliveryCountsIn(
  db: Database,
  projectId: string,
  q: { from: number; to: number; step: number; appName?: string },
) {
  const bucket = sql<number>`CAST((${d.createdAt} - ${q.from}) / ${q.step} AS INTEGER)`;
  const rows = await db
    .select({ i: bucket, status: d.status, n: count() })
    .from(d)
    .where(
      and(
        eq(d.projectId, projectId),
        gte(d.createdAt, new Date(q.from)),
        lt(d.createdAt, new Date(q.to)),
        inArray(d.status, ["delivered", "failed"]),
        q.appName === undefined ? undefined : eq(d.appName, q.appName),
      ),
    )
    .groupBy(bucket, d.status);
  const points: { delivered: number; failed: number }[] = [];
  for (const row of rows) {
    const point = (points[row.i] ??= { delivered: 0, failed: 0 });
    if (row.status === "delivered") point.delivered += row.n;
    else point.failed += row.n;
  }
  return points;
}

/** Receiver origins one receivers' health answer holds at most, busiest first. */
export const RECEIVER_ORIGINS_MAX = 100;

/**
 * The origin of an endpoint, in SQL: the scheme and host (and port) before the path's first `/`.
 * Endpoints are stored as the URL parser printed them (`checkOutboundUrl`: lower-case host, no default
 * port, no user info, a path of at least `/`), so this is `new URL(endpoint).origin`.
 */
const ORIGIN_SQL = WEBHOOK_ORIGIN_SQL;

interface HealthRow {
  origin: string;
  delivered: number;
  failed: number;
  recovered: number;
  held: number;
  pending: number;
  retried: number;
  p95: number | null;
  failed_at: number | null;
  last_status_code: number | null;
  last_error: string | null;
}

/**
 * Each receiver origin's health over the deliveries made in [from, to) (the newest
 * `RECEIVER_ROWS_MAX`), busiest first, at most `RECEIVER_ORIGINS_MAX` origins. Aggregated by D1 in
 * one statement: counts per status, the share retried, the p95 time from the delivery's record to its
 * 2xx (nearest rank, by a window over the delivered ones), the last failure; the Worker holds one
 * row per origin, never the deliveries (50,000 endpoints of 2,048 characters were ~100 MB). With
 * `origin`, that receiver's alone.
 */
export async function receiversHealth(db: Database, projectId: string, from: number, to: number, origin?: string) {
  const { results } = await db.$client
    .prepare(
      `WITH recent AS (
         SELECT ${ORIGIN_SQL} AS origin, status, attempt_count, created_at,
                coalesce(completed_at, created_at) AS settled_at, last_status_code, last_error,
                -- A failed delivery whose message was delivered since (a resend, a recovery) is recovered.
                status = 'failed' AND EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.project_id = ?1
                  AND e.message_id = webhook_deliveries.message_id AND e.status = 'delivered') AS recovered
         FROM webhook_deliveries WHERE project_id = ?1 AND created_at >= ?2 AND created_at < ?3
           ${origin === undefined ? "" : `AND ${ORIGIN_SQL} = ?6`}
         ORDER BY created_at DESC LIMIT ?4),
       counts AS (
         SELECT origin, sum(status = 'delivered') AS delivered, sum(status = 'failed' AND NOT recovered) AS failed,
                sum(recovered) AS recovered, sum(status = 'held') AS held,
                sum(status = 'pending') AS pending, sum(status IN ('delivered', 'failed') AND attempt_count > 1) AS retried
         FROM recent GROUP BY origin ORDER BY count(*) DESC, origin LIMIT ?5),
       ranked AS (
         SELECT origin, settled_at - created_at AS ms,
                row_number() OVER (PARTITION BY origin ORDER BY settled_at - created_at) AS r,
                count(*) OVER (PARTITION BY origin) AS n
         FROM recent WHERE status = 'delivered' AND origin IN (SELECT origin FROM counts)),
       failures AS (
         SELECT origin, settled_at, last_status_code, last_error,
                row_number() OVER (PARTITION BY origin ORDER BY settled_at DESC) AS r
         FROM recent WHERE status = 'failed' AND NOT recovered AND origin IN (SELECT origin FROM counts))
       SELECT c.origin, c.delivered, c.failed, c.recovered, c.held, c.pending, c.retried,
              (SELECT ms FROM ranked k WHERE k.origin = c.origin AND k.r = max(1, (95 * k.n + 99) / 100)) AS p95,
              f.settled_at AS failed_at, f.last_status_code, f.last_error
       FROM counts c LEFT JOIN failures f ON f.origin = c.origin AND f.r = 1
       ORDER BY c.delivered + c.failed + c.recovered + c.held + c.pending DESC, c.origin`,
    )
    // One receiver's alone (read by the index webhook_deliveries_receiver), or every receiver's.
    .bind(projectId, from, to, RECEIVER_ROWS_MAX, RECEIVER_ORIGINS_MAX, ...(origin === undefined ? [] : [origin]))
    .all<HealthRow>();
  // Each receiver's state (paused, disabled and why), and the ones not active that had no delivery in the range.
  const states = await db.select().from(webhookReceivers).where(eq(webhookReceivers.projectId, projectId));
  const stateOf = new Map(states.map((r) => [r.origin, r]));
  const listed = new Set(results.map((h) => h.origin));
  for (const r of states)
    if (r.state !== "active" && !listed.has(r.origin) && (origin === undefined || r.origin === origin))
      results.push({
        origin: r.origin,
        delivered: 0,
        failed: 0,
        recovered: 0,
        held: 0,
        pending: 0,
        retried: 0,
        p95: null,
        failed_at: null,
        last_status_code: null,
        last_error: null,
      });
  return results.map((h) => {
    const settled = h.delivered + h.failed + h.recovered;
    const state = stateOf.get(h.origin);
    const reason =
      h.last_error ?? (h.last_status_code !== null ? `the receiver answered ${h.last_status_code}` : "failed");
    return {
      origin: h.origin,
      state: state?.state ?? "active",
      state_cause: state?.stateCause ?? null,
      failing_since: state?.failingSince?.toISOString() ?? null,
      delivered: h.delivered,
      failed: h.failed,
      recovered: h.recovered,
      held: h.held,
      pending: h.pending,
      retried_share: settled === 0 ? 0 : h.retried / settled,
      p95_run_to_received_ms: h.p95,
      last_failure: h.failed_at === null ? null : { at: new Date(h.failed_at).toISOString(), reason },
    };
  });
}

/** The project's receivers by state: one row per receiver whose settings were ever changed (a paused or disabled one always has one). */
export async function receiverStates(db: Database, projectId: string): Promise<Record<"paused" | "disabled", number>> {
  const rows = await db
    .select({ state: webhookReceivers.state, n: count() })
    .from(webhookReceivers)
    .where(eq(webhookReceivers.projectId, projectId))
    .groupBy(webhookReceivers.state);
  const states = { paused: 0, disabled: 0 };
  for (const row of rows) if (row.state === "paused" || row.state === "disabled") states[row.state] = row.n;
  return states;
}
