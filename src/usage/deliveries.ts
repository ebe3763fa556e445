import { and, count, eq, gte, inArray, isNull, lt, ne, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { webhookDeliveries as d } from "../db/schema";
import { percentileOfSorted } from "./percentiles";

/**
 * What usage reads of the webhook delivery records (D1, written by the delivery pipeline): each run's
 * delivery outcome, deliveries per interval, and each receiver origin's health.
 */

/** D1 binds at most 100 parameters per statement; the project id takes one. */
const IDS_PER_QUERY = 90;
/** Deliveries one receivers' health answer reads at most (newest first); a busier range is summarised from these. */
export const RECEIVER_ROWS_MAX = 50_000;

export interface WebhookOutcome {
  delivery_id: string;
  status: "pending" | "delivered" | "failed";
  attempts: number;
}

/** The delivery of each run in `runIds` (the first one made; a resend is a delivery of its own). */
export async function webhookOutcomes(
  db: Database,
  projectId: string,
  runIds: string[],
): Promise<Map<string, WebhookOutcome>> {
  const outcomes = new Map<string, WebhookOutcome>();
  for (let i = 0; i < runIds.length; i += IDS_PER_QUERY) {
    const rows = await db
      .select({ runId: d.runId, id: d.id, status: d.status, attempts: d.attemptCount })
      .from(d)
      .where(
        and(eq(d.projectId, projectId), inArray(d.runId, runIds.slice(i, i + IDS_PER_QUERY)), isNull(d.resentFrom)),
      )
      .orderBy(d.id);
    for (const row of rows)
      if (!outcomes.has(row.runId))
        outcomes.set(row.runId, { delivery_id: row.id, status: row.status, attempts: row.attempts });
  }
  return outcomes;
}

/** Settled deliveries per interval of [from, to), by the time of their run, indexed from `from`. */
export async function deliveryCounts(
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
        ne(d.status, "pending"),
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

const originOf = (endpoint: string) => {
  try {
    return new URL(endpoint).origin;
  } catch {
    return endpoint;
  }
};

/** Each receiver origin's health over the deliveries made in [from, to), busiest first. */
export async function receiversHealth(db: Database, projectId: string, from: number, to: number) {
  const rows = await db
    .select({
      endpoint: d.endpoint,
      status: d.status,
      attempts: d.attemptCount,
      createdAt: d.createdAt,
      completedAt: d.completedAt,
      lastStatusCode: d.lastStatusCode,
      lastError: d.lastError,
    })
    .from(d)
    .where(and(eq(d.projectId, projectId), gte(d.createdAt, new Date(from)), lt(d.createdAt, new Date(to))))
    .orderBy(sql`${d.createdAt} desc`)
    .limit(RECEIVER_ROWS_MAX);
  const byOrigin = new Map<
    string,
    {
      delivered: number;
      failed: number;
      pending: number;
      retried: number;
      times: number[];
      lastFailure: { at: number; reason: string } | null;
    }
  >();
  for (const row of rows) {
    const origin = originOf(row.endpoint);
    let health = byOrigin.get(origin);
    if (!health)
      byOrigin.set(
        origin,
        (health = { delivered: 0, failed: 0, pending: 0, retried: 0, times: [], lastFailure: null }),
      );
    health[row.status]++;
    if (row.status === "pending") continue;
    if (row.attempts > 1) health.retried++;
    const settledAt = row.completedAt?.getTime() ?? row.createdAt.getTime();
    if (row.status === "delivered") health.times.push(settledAt - row.createdAt.getTime());
    else if (health.lastFailure === null || settledAt > health.lastFailure.at) {
      const reason =
        row.lastError ?? (row.lastStatusCode !== null ? `the receiver answered ${row.lastStatusCode}` : "failed");
      health.lastFailure = { at: settledAt, reason };
    }
  }
  return [...byOrigin]
    .map(([origin, h]) => {
      const settled = h.delivered + h.failed;
      return {
        origin,
        delivered: h.delivered,
        failed: h.failed,
        pending: h.pending,
        retried_share: settled === 0 ? 0 : h.retried / settled,
        p95_run_to_received_ms: percentileOfSorted(
          h.times.sort((a, b) => a - b),
          95,
        ),
        last_failure: h.lastFailure && { at: new Date(h.lastFailure.at).toISOString(), reason: h.lastFailure.reason },
      };
    })
    .sort((a, b) => b.delivered + b.failed + b.pending - (a.delivered + a.failed + a.pending));
}
