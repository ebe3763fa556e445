import { and, count, eq, gte, inArray, isNull, lt, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { WEBHOOK_ORIGIN_SQL, webhookDeliveries as d, webhookReceivers } from "../db/schema";
import type { RunDelivery } from "./routes";
import { allLimited } from "../platform/concurrency";
import type { Scope } from "../platform/scope";
import { shardOf } from "../platform/shards";
import { inEachLog, logDbOf, projectLogDbs } from "../webhooks/log";

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
  for (const answer of await inEachLog(scope, projectId, (db) => deliveryCountsIn(db, projectId, q)))
    for (const [i, point] of answer.entries()) {
      if (!point) continue;
      const sum = (points[i] ??= { delivered: 0, failed: 0 });
      sum.delivered += point.delivered;
      sum.failed += point.failed;
    }
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
 * The deliveries one health answer reads in one store, in SQL: those of project ?1 made in [?2, ?3),
 * newest first, at most ?4; with `originParam`, that receiver's alone (read by the index
 * webhook_deliveries_receiver). `recovered` marks a failed delivery whose message was delivered since
 * (a resend, a recovery): a resend is in its original's store (its shard), so this looks in one store.
 */
const recentSql = (originParam: string | undefined, recovered = true) =>
  `SELECT ${ORIGIN_SQL} AS origin, status, attempt_count, created_at,
                coalesce(completed_at, created_at) AS settled_at, last_status_code, last_error${
                  recovered
                    ? `,
                -- A failed delivery whose message was delivered since (a resend, a recovery) is recovered.
                status = 'failed' AND EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.project_id = ?1
                  AND e.message_id = webhook_deliveries.message_id AND e.status = 'delivered') AS recovered`
                    : ""
                }
         FROM webhook_deliveries WHERE project_id = ?1 AND created_at >= ?2 AND created_at < ?3
           ${originParam === undefined ? "" : `AND ${ORIGIN_SQL} = ${originParam}`}
         ORDER BY created_at DESC LIMIT ?4`;

/** The counts per origin of `recent`, in SQL: `total` is every delivery of the origin read. */
const COUNTS_SQL = `SELECT origin, count(*) AS total, sum(status = 'delivered') AS delivered,
                sum(status = 'failed' AND NOT recovered) AS failed,
                sum(recovered) AS recovered, sum(status = 'held') AS held,
                sum(status = 'pending') AS pending, sum(status IN ('delivered', 'failed') AND attempt_count > 1) AS retried
         FROM recent GROUP BY origin ORDER BY count(*) DESC, origin`;

/** Each origin's latest failure not recovered of `recent`, in SQL (`r = 1`), for the origins of `counts`. */
const FAILURES_SQL = `SELECT origin, settled_at, last_status_code, last_error,
                row_number() OVER (PARTITION BY origin ORDER BY settled_at DESC) AS r
         FROM recent WHERE status = 'failed' AND NOT recovered AND origin IN (SELECT origin FROM counts)`;

/**
 * Each receiver origin's health over the deliveries made in [from, to) (the newest
 * `RECEIVER_ROWS_MAX`), busiest first, at most `RECEIVER_ORIGINS_MAX` origins: counts per status, the
 * share retried, the p95 time from the delivery's record to its 2xx (nearest rank over the delivered
 * ones), the last failure. The Worker holds a few rows per origin, never the deliveries (50,000
 * endpoints of 2,048 characters were ~100 MB). With `origin`, that receiver's alone. Read from D1 in
 * one statement (`healthInD1`), or from the project's 8 logs and D1 (`healthInLogs`) when
 * `DELIVERY_LOG_STORE=objects`.
 */
export async function receiversHealth(
  scope: Pick<Scope, "env" | "db" | "config">,
  projectId: string,
  from: number,
  to: number,
  origin?: string,
) {
  const results =
    scope.config.deliveryLogStore === "objects"
      ? await healthInLogs(projectLogDbs(scope, projectId), projectId, from, to, origin)
      : await healthInD1(scope.db, projectId, from, to, origin);
  // Each receiver's state (paused, disabled and why), and the ones not active that had no delivery in the range.
  const states = await scope.db.select().from(webhookReceivers).where(eq(webhookReceivers.projectId, projectId));
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

/** The health rows of `receiversHealth` aggregated by D1 in one statement (the p95 by a window over the delivered ones). */
async function healthInD1(db: Database, projectId: string, from: number, to: number, origin?: string) {
  const { results } = await db.$client
    .prepare(
      `WITH recent AS (
         ${recentSql(origin === undefined ? undefined : "?6")}),
       counts AS (
         ${COUNTS_SQL} LIMIT ?5),
       ranked AS (
         SELECT origin, settled_at - created_at AS ms,
                row_number() OVER (PARTITION BY origin ORDER BY settled_at - created_at) AS r,
                count(*) OVER (PARTITION BY origin) AS n
         FROM recent WHERE status = 'delivered' AND origin IN (SELECT origin FROM counts)),
       failures AS (
         ${FAILURES_SQL})
       SELECT c.origin, c.delivered, c.failed, c.recovered, c.held, c.pending, c.retried,
              (SELECT ms FROM ranked k WHERE k.origin = c.origin AND k.r = max(1, (95 * k.n + 99) / 100)) AS p95,
              f.settled_at AS failed_at, f.last_status_code, f.last_error
       FROM counts c LEFT JOIN failures f ON f.origin = c.origin AND f.r = 1
       ORDER BY c.delivered + c.failed + c.recovered + c.held + c.pending DESC, c.origin`,
    )
    // One receiver's alone (read by the index webhook_deliveries_receiver), or every receiver's.
    .bind(projectId, from, to, RECEIVER_ROWS_MAX, RECEIVER_ORIGINS_MAX, ...(origin === undefined ? [] : [origin]))
    .all<HealthRow>();
  return results;
}

/**
 * Origins one store answers at most in `healthInLogs`, busiest first: the merged busiest
 * `RECEIVER_ORIGINS_MAX` are exact while no store saw more origins than this in the range.
 */
const STORE_ORIGINS_MAX = 1_000;

/**
 * Ranks between the marks a store gives of its newest deliveries (`newestSince`): the row cap of a
 * busy range is met to within about 2 × this per store (see there).
 */
export const RECEIVER_CUT_STEP = 100;

/** One origin's figures in one store: its counts, its latest failure there, and every delivery the store read (`read`). */
interface StoreHealthRow extends Omit<HealthRow, "p95"> {
  total: number;
  read: number;
}

/** The nearest rank of the p95 among `n` values in ascending order (1-based): D1's `max(1, (95 * n + 99) / 100)`. */
const p95Rank = (n: number) => Math.max(1, Math.floor((95 * n + 99) / 100));

/**
 * The health rows of `receiversHealth` over several stores (the project's 8 logs, then D1), each asked
 * in SQL for figures that add up, never for its deliveries:
 * 1. each store's counts per origin and its latest failure: counts add, the last failure is the latest
 *    of the stores'. The busiest `RECEIVER_ORIGINS_MAX` of the sums are kept.
 * 2. the p95, which does not add: with each origin's delivered count N known from 1, its nearest-rank
 *    p95 (rank ceil(0.95 N) ascending) is the k-th largest duration, k = N - ceil(0.95 N) + 1, of the
 *    union; each store's k largest of that origin hold the union's k largest, so each store answers
 *    those (about 5% of its delivered ones) and the k-th largest of the answers is exact.
 * The row cap: D1's statement reads the newest `RECEIVER_ROWS_MAX` deliveries of the range. Here the
 * stores are read over the whole range first; when together they hold more, the range is cut at a
 * time (`newestSince`) chosen so that the deliveries made since number at most `RECEIVER_ROWS_MAX`
 * and fall short of it by about 2 × `RECEIVER_CUT_STEP` per store at most, and step 1 is asked again
 * from that time: the newest deliveries of all the stores together, as close to the cap as a cut by
 * time gives without reading them all.
 */
async function healthInLogs(
  dbs: Database[],
  projectId: string,
  from: number,
  to: number,
  origin?: string,
): Promise<HealthRow[]> {
  let stores = await allLimited(dbs, 6, (db) => storeHealth(db, projectId, from, to, origin));
  let since = from;
  const read = (rows: StoreHealthRow[]) => rows[0]?.read ?? 0;
  if (stores.reduce((sum, rows) => sum + read(rows), 0) > RECEIVER_ROWS_MAX) {
    since = await newestSince(dbs, projectId, from, to, origin);
    stores = await allLimited(dbs, 6, (db) => storeHealth(db, projectId, since, to, origin));
  }

  const byOrigin = new Map<string, StoreHealthRow>();
  for (const row of stores.flat()) {
    const sum = byOrigin.get(row.origin);
    if (!sum) {
      byOrigin.set(row.origin, { ...row });
      continue;
    }
    sum.total += row.total;
    sum.delivered += row.delivered;
    sum.failed += row.failed;
    sum.recovered += row.recovered;
    sum.held += row.held;
    sum.pending += row.pending;
    sum.retried += row.retried;
    if (row.failed_at !== null && (sum.failed_at === null || row.failed_at > sum.failed_at)) {
      sum.failed_at = row.failed_at;
      sum.last_status_code = row.last_status_code;
      sum.last_error = row.last_error;
    }
  }
  // Busiest first, then by origin as SQLite orders text (byte-wise: origins are ASCII).
  const busiest = [...byOrigin.values()]
    .sort((a, b) => b.total - a.total || (a.origin < b.origin ? -1 : a.origin > b.origin ? 1 : 0))
    .slice(0, RECEIVER_ORIGINS_MAX);

  const wanted = busiest.filter((h) => h.delivered > 0).map((h) => [h.origin, h.delivered - p95Rank(h.delivered) + 1]);
  const slowest = new Map<string, number[]>();
  if (wanted.length > 0)
    for (const rows of await allLimited(dbs, 6, (db) => storeSlowest(db, projectId, since, to, wanted, origin)))
      for (const { origin: o, ms } of rows) {
        const durations = slowest.get(o);
        if (durations) durations.push(ms);
        else slowest.set(o, [ms]);
      }
  const k = new Map(wanted.map(([o, n]) => [o as string, n as number]));
  return busiest.map(({ total: _total, read: _read, ...h }) => {
    const durations = (slowest.get(h.origin) ?? []).sort((a, b) => b - a);
    // Fewer than k only if deliveries settled between the two steps: the smallest of those answered.
    const p95 = durations.length === 0 ? null : durations[Math.min(k.get(h.origin)! - 1, durations.length - 1)]!;
    return { ...h, p95 };
  });
}

/** Step 1 of `healthInLogs` in one store: its counts per origin (the busiest `STORE_ORIGINS_MAX`), each with its latest failure. */
async function storeHealth(db: Database, projectId: string, from: number, to: number, origin?: string) {
  const { results } = await db.$client
    .prepare(
      `WITH recent AS (
         ${recentSql(origin === undefined ? undefined : "?6")}),
       counts AS (
         ${COUNTS_SQL} LIMIT ?5),
       failures AS (
         ${FAILURES_SQL})
       SELECT c.origin, c.total, c.delivered, c.failed, c.recovered, c.held, c.pending, c.retried,
              f.settled_at AS failed_at, f.last_status_code, f.last_error, (SELECT count(*) FROM recent) AS read
       FROM counts c LEFT JOIN failures f ON f.origin = c.origin AND f.r = 1`,
    )
    // At most one past the cap: enough to tell that the cap is passed.
    .bind(projectId, from, to, RECEIVER_ROWS_MAX + 1, STORE_ORIGINS_MAX, ...(origin === undefined ? [] : [origin]))
    .all<StoreHealthRow>();
  return results;
}

/** Step 2 of `healthInLogs` in one store: the `k` longest times to a 2xx of each origin of `wanted` (`[origin, k]`). */
async function storeSlowest(
  db: Database,
  projectId: string,
  from: number,
  to: number,
  wanted: (string | number)[][],
  origin?: string,
) {
  const { results } = await db.$client
    .prepare(
      `WITH recent AS (
         ${recentSql(origin === undefined ? undefined : "?6", false)}),
       wanted AS (
         SELECT json_extract(value, '$[0]') AS origin, json_extract(value, '$[1]') AS k FROM json_each(?5)),
       slowest AS (
         SELECT origin, settled_at - created_at AS ms,
                row_number() OVER (PARTITION BY origin ORDER BY settled_at - created_at DESC) AS r
         FROM recent WHERE status = 'delivered' AND origin IN (SELECT origin FROM wanted))
       SELECT s.origin, s.ms FROM slowest s JOIN wanted w ON w.origin = s.origin WHERE s.r <= w.k`,
    )
    // The origins and their k as one JSON value: 100 origins would pass D1's 100 bound values.
    .bind(projectId, from, to, RECEIVER_ROWS_MAX + 1, JSON.stringify(wanted), ...(origin === undefined ? [] : [origin]))
    .all<{ origin: string; ms: number }>();
  return results;
}

/**
 * The time from which the deliveries of all `dbs` in [from, to) number at most `RECEIVER_ROWS_MAX`, as
 * early as the stores' marks tell. Each store gives the time of every `RECEIVER_CUT_STEP`-th of its
 * newest deliveries and of its last one read (`r = n`; `n` past the cap says it holds more): ~500 small
 * rows. A store holds at most `j - 1` deliveries since a time later than its mark of rank `j`; the
 * earliest mark at which those bounds add up to the cap at most is the cut. Between two adjacent marks
 * no store has more than `RECEIVER_CUT_STEP` deliveries, and a bound overshoots by less than that, so
 * the deliveries since the cut fall short of the cap by about 2 × `RECEIVER_CUT_STEP` per store at most.
 */
async function newestSince(dbs: Database[], projectId: string, from: number, to: number, origin?: string) {
  const stores = await allLimited(dbs, 6, async (db) => {
    const { results } = await db.$client
      .prepare(
        `SELECT r, created_at AS at, n FROM (
           SELECT created_at, row_number() OVER (ORDER BY created_at DESC) AS r, count(*) OVER () AS n
           FROM (SELECT created_at FROM webhook_deliveries WHERE project_id = ?1 AND created_at >= ?2 AND created_at < ?3
                   ${origin === undefined ? "" : `AND ${ORIGIN_SQL} = ?6`}
                 ORDER BY created_at DESC LIMIT ?4))
         WHERE r % ?5 = 0 OR r = n ORDER BY r`,
      )
      .bind(projectId, from, to, RECEIVER_ROWS_MAX + 1, RECEIVER_CUT_STEP, ...(origin === undefined ? [] : [origin]))
      .all<{ r: number; at: number; n: number }>();
    return results;
  });
  // At most how many deliveries `marks`' store holds since `at`: one fewer than its first mark older than it.
  const atMost = (marks: { r: number; at: number; n: number }[], at: number) => {
    const older = marks.find((m) => m.at < at);
    if (older) return older.r - 1;
    const n = marks[0]?.n ?? 0;
    return n > RECEIVER_ROWS_MAX ? Infinity : n;
  };
  const since = (at: number) => stores.reduce((sum, marks) => sum + atMost(marks, at), 0);
  const times = [...new Set([from, ...stores.flatMap((marks) => marks.map((m) => m.at))])].sort((a, b) => a - b);
  // The bound only falls as the time grows: the earliest time within the cap, by bisection.
  let low = 0;
  let high = times.length - 1;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (since(times[mid]!) <= RECEIVER_ROWS_MAX) high = mid;
    else low = mid + 1;
  }
  return times[low]!;
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
