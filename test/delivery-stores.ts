import { createExecutionContext, createScheduledController, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { createDb, type Database } from "../src/db/client";
import type { DeliveryLog } from "../src/index";
import { getConfig } from "../src/platform/env";
import type { SqlCall } from "../src/platform/object-d1";
import { PROJECT_SHARDS, shardOf } from "../src/platform/shards";
import { aroundD1 } from "../src/platform/subrequests";
import {
  deliveryLogDb,
  deliveryLogName,
  deliveryLogObject,
  deliveryLogOfShard,
  type LogCallOptions,
} from "../src/webhooks/log";
import type { DeliveryMessage } from "../src/webhooks/message";
import { claimAttempt } from "../src/webhooks/store";
import { createWorker } from "../src/worker";
import { FAULT, faultyD1, type Refused } from "./faulty-d1";
import { testDeps } from "./helpers";

/**
 * Every store that may hold deliveries, as the tests read them: each log of every project D1 knows (of
 * `id`'s shard alone, when given: a delivery's id or its run's), then D1 (deliveries recorded before the
 * logs, or with `DELIVERY_LOG_STORE=d1`). Asking a log that was never written makes it, empty.
 */
export async function deliveryStores(id?: string): Promise<D1Database[]> {
  const shards = id === undefined ? Array.from({ length: PROJECT_SHARDS }, (_, shard) => shard) : [shardOf(id)];
  const logs = (await projectIds()).flatMap((projectId) => shards.map((shard) => logStore(projectId, shard)));
  return [...logs, env.DB];
}

/** The delivery log of `projectId`'s shard `shard`, as a D1 database. */
const logStore = (projectId: string, shard: number): D1Database =>
  deliveryLogDb(env, deliveryLogOfShard(projectId, shard)).$client;

/** Every project D1 knows: the tests' deliveries are theirs. */
async function projectIds(): Promise<string[]> {
  const { results } = await env.DB.prepare("SELECT id FROM projects ORDER BY id").all<{ id: string }>();
  return results.map((row) => row.id);
}

/** The store that holds delivery `id` (`deliveryStores`), or undefined. */
export async function deliveryStoreOf(id: string): Promise<D1Database | undefined> {
  for (const store of await deliveryStores(id)) {
    if (await store.prepare("SELECT 1 FROM webhook_deliveries WHERE id = ?").bind(id).first()) return store;
  }
  return undefined;
}

/**
 * The rows `query` finds in every store of deliveries (`deliveryStores`, of `id`'s shard alone when
 * given), one store's after another: a test's read of "the deliveries" wherever they are recorded.
 */
export async function rowsInDeliveryStores<T = Record<string, unknown>>(
  query: string,
  binds: unknown[] = [],
  id?: string,
): Promise<T[]> {
  const rows: T[] = [];
  for (const store of await deliveryStores(id)) {
    const { results } = await store
      .prepare(query)
      .bind(...binds)
      .all<T>();
    rows.push(...results);
  }
  return rows;
}

/** How many rows `query` (a `SELECT COUNT(*) AS n …`) counts across every store of deliveries. */
export async function countInDeliveryStores(query: string, binds: unknown[] = []): Promise<number> {
  const rows = await rowsInDeliveryStores<{ n: number }>(query, binds);
  return rows.reduce((sum, row) => sum + row.n, 0);
}

/**
 * `logs` (the `DELIVERY_LOG` binding) with `before` awaited ahead of each call of a log (a statement, or a
 * batch: one round trip), given its statements: a test's faults, delays and counts, as `aroundD1` for D1.
 * `before` may throw to refuse the call.
 */
export function logsAround(logs: Env["DELIVERY_LOG"], before: (calls: SqlCall[]) => unknown): Env["DELIVERY_LOG"] {
  return new Proxy(logs, {
    get(target, prop) {
      if (prop === "get")
        return (id: DurableObjectId) => {
          const stub = target.get(id);
          return {
            async sql(calls: SqlCall[], options?: LogCallOptions) {
              await before(calls);
              return stub.sql(calls, options);
            },
          };
        };
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * Bindings under which every round trip to the stores of deliveries (D1's, and each log's) starts `ms`
 * late: whichever `DELIVERY_LOG_STORE` is in use.
 */
export const slowDeliveryStores = (ms: number): Pick<Env, "DB" | "DELIVERY_LOG"> => {
  const late = () => new Promise((resolve) => setTimeout(resolve, ms));
  return { DB: aroundD1(env.DB, late), DELIVERY_LOG: logsAround(env.DELIVERY_LOG, late) };
};

/** Whether this test project records deliveries in the logs (`DELIVERY_LOG_STORE=objects`). */
export const inLogs = () => getConfig(env).deliveryLogStore === "objects";

/**
 * The database that records `message`'s delivery where the gateway records it (`DELIVERY_LOG_STORE`),
 * and whether it is a log: for a test that writes as the gateway would (a claim made before a crash).
 */
export function storeOfMessage(message: Pick<DeliveryMessage, "projectId" | "id">): { db: Database; inLog: boolean } {
  return inLogs()
    ? { db: deliveryLogDb(env, deliveryLogName(message.projectId, message.id)), inLog: true }
    : { db: createDb(env.DB), inLog: false };
}

/** Claims `message`'s next attempt in its store, as a lane or consumer that then died would have. */
export function claimInStore(message: DeliveryMessage, at: Date) {
  const { db, inLog } = storeOfMessage(message);
  return claimAttempt(db, message, at, undefined, inLog);
}

/**
 * Bindings under which the stores of deliveries (D1's, and each log's) fail as `faultyD1` fails D1: every
 * round trip with a statement `fails` picks is refused (a batch whole), and its statements kept in `refused`.
 */
export function faultyDeliveryStores(
  fails: (sql: string) => boolean,
  refused: Refused[] = [],
): Pick<Env, "DB" | "DELIVERY_LOG"> {
  const DELIVERY_LOG = logsAround(env.DELIVERY_LOG, (calls) => {
    const failing = calls.filter((call) => fails(call.sql));
    if (failing.length === 0) return;
    for (const call of failing) refused.push({ sql: call.sql, values: call.params });
    throw new Error(FAULT);
  });
  return { DB: faultyD1(env.DB, fails, refused), DELIVERY_LOG };
}

/** Runs `query` (a write: a test's own change of the deliveries) in every store of deliveries (of `id`'s shard alone when given). */
export async function changeInDeliveryStores(query: string, binds: unknown[] = [], id?: string): Promise<void> {
  for (const store of await deliveryStores(id))
    await store
      .prepare(query)
      .bind(...binds)
      .run();
}

/** The first row `query` finds in any store of deliveries (of `id`'s shard alone when given), or null. */
export async function firstInDeliveryStores<T = Record<string, unknown>>(
  query: string,
  binds: unknown[] = [],
  id?: string,
): Promise<T | null> {
  const [row] = await rowsInDeliveryStores<T>(query, binds, id);
  return row ?? null;
}

/**
 * What time does to the stores of deliveries at `now`: the half-hourly cron over D1 (its records from
 * before the logs) and a retention pass of every log, as its alarm would run it (tests turn the alarms'
 * own off: `OBJECT_SWEEPS`).
 */
export async function sweepDeliveryStores(now: Date): Promise<void> {
  await createWorker(testDeps({ now: () => now })).scheduled(
    createScheduledController({ cron: "*/30 * * * *" }),
    env,
    createExecutionContext(),
  );
  await retainLogs(now);
}

/** A retention pass at `now` of every log of every project D1 knows. */
export async function retainLogs(now: Date): Promise<void> {
  for (const projectId of await projectIds())
    for (let shard = 0; shard < PROJECT_SHARDS; shard++)
      await runInDurableObject(deliveryLogObject(env, deliveryLogOfShard(projectId, shard)), (log: DeliveryLog) =>
        log.retain(now.getTime()),
      );
}

/** A delivery as the receivers' tests read it, with the store that holds it. */
export interface StoredDelivery {
  id: string;
  run_id: string;
  message_id: string;
  status: string;
  attempt_count: number;
  last_error: string | null;
  task_id: string | null;
  resent_from: string | null;
  created_at: number;
  /** The shard of the log that holds it; null: D1. */
  shard: number | null;
}

/** Every delivery of `projectId`, in its 8 logs and in D1, in the order they were recorded (created_at, id). */
export async function projectDeliveries(projectId: string): Promise<StoredDelivery[]> {
  const query = `SELECT id, run_id, message_id, status, attempt_count, last_error, task_id, resent_from, created_at
    FROM webhook_deliveries WHERE project_id = ?`;
  const stores: [D1Database, number | null][] = [
    ...Array.from({ length: PROJECT_SHARDS }, (_, shard): [D1Database, number] => [logStore(projectId, shard), shard]),
    [env.DB, null],
  ];
  const rows: StoredDelivery[] = [];
  for (const [store, shard] of stores) {
    const { results } = await store.prepare(query).bind(projectId).all<Omit<StoredDelivery, "shard">>();
    rows.push(...results.map((row) => ({ ...row, shard })));
  }
  return rows.sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
