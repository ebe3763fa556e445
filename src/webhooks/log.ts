import { sql } from "drizzle-orm";
import { createDb, type Database } from "../db/client";
import { allLimited } from "../platform/concurrency";
import { ApiError } from "../platform/errors";
import { d1Over, type SqlAnswer, type SqlCall } from "../platform/object-d1";
import type { StorageShape } from "../platform/object-storage";
import type { Scope } from "../platform/scope";
import { PROJECT_SHARDS, shardOf } from "../platform/shards";

/**
 * The delivery log per project (issue 41: the data plane leaves D1): a Durable Object per project and
 * shard (`deliveryLogName`) holds the deliveries, their attempts, inline bodies and sealed secrets in
 * the same two tables D1 has (`DELIVERY_LOG_STORAGE`), so the delivery code's statements run there
 * unchanged, through a `D1Database` whose every statement or batch is one call of the object
 * (`deliveryLogDb`, platform/object-d1.ts). A delivery's id is made in its run's shard
 * (platform/shards.ts), so a delivery, its resends and the other deliveries of its run are in one
 * object, and the queries that relate them (a message delivered since, by its `message_id`) stay inside
 * it. docs/architecture.md#the-sixth-waves-moves-seams-agreed-before-either-moves.
 *
 * Which store the delivery code writes is `DELIVERY_LOG_STORE` (`logDbOf`, `projectLogDbs`): the logs by
 * default (`objects`), D1 with `d1` (the store before, kept to roll back to). D1's records from before
 * the logs are read, attempted and swept where they are until their retention passes
 * (docs/operations.md#upgrading-to-the-delivery-logs).
 */

/**
 * The tables, as D1's migrations left them (migrations/0001, 0005, 0007, 0009, 0013, 0015) but for the
 * foreign key to `projects`, which lives in D1. (The API deletes no project; a project an operator
 * removes from D1 keeps its logs until their retention empties them.) The trigger is the one that
 * settles a delivery from its attempt's outcome in the same statement.
 */
export const DELIVERY_LOG_STORAGE: StorageShape = {
  meta: { table: "log_meta", value: "INTEGER" },
  made: "webhook_deliveries",
  schema: [
    `CREATE TABLE IF NOT EXISTS "webhook_deliveries" (
  "id" text PRIMARY KEY NOT NULL,
  "project_id" text NOT NULL,
  "run_id" text NOT NULL,
  "endpoint" text NOT NULL,
  "signed" integer NOT NULL,
  "body_bytes" integer NOT NULL,
  "status" text NOT NULL,
  "attempt_count" integer DEFAULT 0 NOT NULL,
  "last_status_code" integer,
  "last_error" text,
  "created_at" integer NOT NULL,
  "updated_at" integer NOT NULL,
  "completed_at" integer,
  "body" text,
  "body_key" text,
  "sealed_secret" text,
  "body_purged_at" integer,
  "resent_from" text,
  "message_id" text,
  "app_name" text,
  "task_id" text,
  CONSTRAINT "webhook_deliveries_status" CHECK ("status" IN ('pending', 'held', 'delivered', 'failed'))
)`,
    `CREATE TABLE IF NOT EXISTS "webhook_attempts" (
  "delivery_id" text NOT NULL,
  "attempt" integer NOT NULL,
  "at" integer NOT NULL,
  "status_code" integer,
  "error" text,
  "duration_ms" integer NOT NULL,
  "outcome" text,
  PRIMARY KEY ("delivery_id", "attempt"),
  FOREIGN KEY ("delivery_id") REFERENCES "webhook_deliveries" ("id") ON DELETE CASCADE
)`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_created" ON "webhook_deliveries" ("created_at")`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_expiring" ON "webhook_deliveries" ("created_at")
  WHERE "webhook_deliveries"."body_purged_at" IS NOT NULL AND "webhook_deliveries"."status" IN ('delivered', 'failed')`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_unpurged" ON "webhook_deliveries" ("created_at")
  WHERE "webhook_deliveries"."body_purged_at" IS NULL AND "webhook_deliveries"."status" IN ('delivered', 'failed')`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_message" ON "webhook_deliveries" ("project_id", "message_id")`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_pending" ON "webhook_deliveries" ("status", "updated_at")`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_project" ON "webhook_deliveries" ("project_id", "id")`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_project_created" ON "webhook_deliveries" ("project_id", "created_at")`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_receiver" ON "webhook_deliveries" ("project_id",
  (substr(endpoint, 1, instr(endpoint, '://') + 1 + instr(substr(endpoint, instr(endpoint, '://') + 3) || '/', '/'))), "created_at")`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_run" ON "webhook_deliveries" ("project_id", "run_id", "id")`,
    `CREATE INDEX IF NOT EXISTS "webhook_deliveries_task" ON "webhook_deliveries" ("task_id", "status")`,
    `CREATE TRIGGER IF NOT EXISTS "webhook_attempt_settles" AFTER INSERT ON "webhook_attempts" BEGIN
  UPDATE "webhook_deliveries" SET
    "last_status_code" = NEW."status_code",
    "last_error" = NEW."error",
    "updated_at" = NEW."at",
    "completed_at" = CASE WHEN "status" = 'pending' AND NEW."outcome" IN ('delivered', 'failed') THEN NEW."at" ELSE "completed_at" END,
    "status" = CASE WHEN "status" = 'pending' AND NEW."outcome" IN ('delivered', 'failed') THEN NEW."outcome" ELSE "status" END
  WHERE "id" = NEW."delivery_id";
END`,
  ],
  steps: [],
};

/** The log of `projectId`'s shard `shard`: the name of its Durable Object. */
export const deliveryLogOfShard = (projectId: string, shard: number): string => `${projectId}:${shard}`;

/** The log that holds delivery `deliveryId` (or every delivery of run `deliveryId`: the same shard). */
export const deliveryLogName = (projectId: string, deliveryId: string): string =>
  deliveryLogOfShard(projectId, shardOf(deliveryId));

/** The log object named `name` (`deliveryLogName`): every delivery log is addressed through this. */
export const deliveryLogObject = (env: Env, name: string) => env.DELIVERY_LOG.get(env.DELIVERY_LOG.idFromName(name));

/** Calls that add deliveries (`grows`) are refused past the object's bound; others always run. */
export interface LogCallOptions {
  grows?: boolean;
}

/**
 * A log past its byte bound refused a call that adds deliveries (`DELIVERY_LOG_BYTES_MAX`): a 503 with
 * `Retry-After: 60` where it reaches a caller (a run with a webhook is refused before its app is called).
 */
export class DeliveryLogFullError extends ApiError {
  constructor(readonly log: string) {
    super(
      "service_unavailable",
      "This project's webhook delivery log is full: it takes no new delivery until its retention frees room. Try again later.",
      { headers: { "Retry-After": "60" } },
    );
  }
}

/**
 * The log named `name` as a drizzle database: each statement or batch one call of the object. With
 * `grows`, every call is one that adds deliveries and is refused (`DeliveryLogFullError`) past the bound.
 */
export function deliveryLogDb(env: Env, name: string, options: LogCallOptions = {}): Database {
  const key = `${options.grows === true} ${name}`;
  let databases = logDatabases.get(env);
  if (!databases) logDatabases.set(env, (databases = new Map()));
  const known = databases.get(key);
  if (known) return known;
  // A stub per call, never one kept: a stub is I/O of the request (or object) that made it, and this
  // database is kept per isolate, so another request or object would fail using it ("Cannot perform I/O
  // on behalf of a different …"). Making one is local work (a name's id), no round trip.
  const send = async (calls: SqlCall[]): Promise<SqlAnswer[]> => {
    const answer = await deliveryLogObject(env, name).sql(calls, options);
    if ("full" in answer) throw new DeliveryLogFullError(name);
    return answer.answers;
  };
  const db = createDb(d1Over(send));
  // drizzle builds its schema's config per database: kept per isolate, the oldest let go past the cap.
  if (databases.size >= LOG_DATABASES_MAX) databases.delete(databases.keys().next().value!);
  databases.set(key, db);
  return db;
}

/** Log databases an isolate keeps made (`deliveryLogDb`), per binding set. */
const LOG_DATABASES_MAX = 512;
const logDatabases = new WeakMap<Env, Map<string, Database>>();

/**
 * The database that records delivery `id` of `projectId` (a delivery's id, or its run's: the same
 * shard): its project's log when `DELIVERY_LOG_STORE=objects`, else D1. With `grows`, the calls add
 * deliveries and are refused past the log's bound.
 */
export function logDbOf(
  scope: Pick<Scope, "env" | "db" | "config">,
  projectId: string,
  id: string,
  options: LogCallOptions = {},
): Database {
  return scope.config.deliveryLogStore === "objects"
    ? deliveryLogDb(scope.env, deliveryLogName(projectId, id), options)
    : scope.db;
}

/**
 * Every database that may hold `projectId`'s deliveries matching a list: D1 alone (`DELIVERY_LOG_STORE=d1`),
 * else the log of run `runId`'s shard when the list is of one run, or all 8 of its logs, then D1 (which
 * recorded deliveries before the logs did, kept for its retention).
 */
export function projectLogDbs(scope: Pick<Scope, "env" | "db" | "config">, projectId: string, runId?: string) {
  if (scope.config.deliveryLogStore !== "objects") return [scope.db];
  const shards = runId === undefined ? Array.from({ length: PROJECT_SHARDS }, (_, shard) => shard) : [shardOf(runId)];
  return [...shards.map((shard) => deliveryLogDb(scope.env, deliveryLogOfShard(projectId, shard))), scope.db];
}

/**
 * `work` in every database that may hold `projectId`'s deliveries (`projectLogDbs`, of run `runId`'s
 * shard alone when given), at most 6 at once (a Worker's simultaneous connections); their answers in that
 * order, D1's last. One that fails fails the whole: a caller merging them never acts on part of them.
 */
export function inEachLog<T>(
  scope: Pick<Scope, "env" | "db" | "config">,
  projectId: string,
  work: (db: Database) => Promise<T>,
  runId?: string,
): Promise<T[]> {
  return allLimited(projectLogDbs(scope, projectId, runId), 6, work);
}

/**
 * The first row `query` finds in any database that may hold `projectId`'s deliveries (`projectLogDbs`),
 * asked one after another until one answers with a row: for "is there any …" checks.
 */
export async function firstInLogs<T>(
  scope: Pick<Scope, "env" | "db" | "config">,
  projectId: string,
  query: (db: Database) => Promise<T[]>,
): Promise<T | undefined> {
  for (const db of projectLogDbs(scope, projectId)) {
    const [row] = await query(db);
    if (row !== undefined) return row;
  }
  return undefined;
}

/** How long an isolate trusts what it learnt of D1's open deliveries (`d1HoldsOpenDeliveries`). */
const LEGACY_CHECK_MS = 60_000;
let legacyOpen: { may: boolean; at: number } | undefined;

/**
 * Whether D1 may still hold deliveries `pending` or `held` (recorded before the logs: a deployment that
 * switched `DELIVERY_LOG_STORE` to `objects` while they were on their way). Asked at most once a minute
 * per isolate; D1 unavailable, what was last seen stands (none, if never asked). Within 30 minutes of the
 * switch the sweeper has settled every pending one, and a held one ends at the body retention.
 */
export async function d1HoldsOpenDeliveries(db: Database): Promise<boolean> {
  if (legacyOpen !== undefined && Date.now() - legacyOpen.at < LEGACY_CHECK_MS) return legacyOpen.may;
  try {
    const rows = await db.all<{ k: number }>(
      sql`SELECT 1 AS k FROM webhook_deliveries WHERE status IN ('pending', 'held') LIMIT 1`,
    );
    legacyOpen = { may: rows.length > 0, at: Date.now() };
  } catch {
    legacyOpen ??= { may: false, at: 0 };
  }
  return legacyOpen.may;
}
/** Tests that seed D1 with deliveries of the code before forget what the isolate learnt. */
export const forgetLegacyDeliveries = () => {
  legacyOpen = undefined;
};

/**
 * Whether delivery `id` is one D1 recorded before the logs and holds open (`pending` or `held`): its
 * attempts are then recorded where it is, in D1, not begun again in its log. Only while D1 holds any.
 */
export async function openInD1(scope: Pick<Scope, "db" | "config">, id: string): Promise<boolean> {
  if (scope.config.deliveryLogStore !== "objects" || !(await d1HoldsOpenDeliveries(scope.db))) return false;
  const rows = await scope.db.all<{ k: number }>(
    sql`SELECT 1 AS k FROM webhook_deliveries WHERE id = ${id} AND status IN ('pending', 'held')`,
  );
  return rows.length > 0;
}
