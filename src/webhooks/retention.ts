import { sql } from "drizzle-orm";
import { webhookAttempts, webhookDeliveries } from "../db/schema";
import { log } from "../platform/log";
import type { PurgeStep } from "../platform/purge";
import type { Scope } from "../platform/scope";

/**
 * The delivery log's retention (docs/webhooks.md#retention), in two steps the purge runs in slices
 * (src/platform/purge.ts): a settled delivery's body and sealed secret go `WEBHOOK_BODY_RETENTION_DAYS`
 * after it was created (resend answers 410 from then), its record and attempts
 * `WEBHOOK_RECORD_RETENTION_DAYS` after (the list and receivers' health no longer count it). Only
 * `delivered` and `failed` deliveries: a `pending` one is settled by the sweeper first (30 minutes), a
 * `held` one by the receivers' housekeeping at the body retention (src/webhooks/housekeeping.ts), and
 * only then do they qualify. A record goes only once its body has: its R2 object is never orphaned.
 *
 * Each slice is one statement (or one batch: one transaction) over a partial index that holds exactly
 * the rows it may take (`webhook_deliveries_unpurged`, `webhook_deliveries_expiring`), oldest first, so
 * it reads no row it leaves. The store-specific part of a purge a per-project delivery log could run
 * from its alarm instead of D1: the same two steps on its own tables.
 */

/**
 * The ids of the next slice of settled deliveries created before `before`, oldest first: those whose
 * body is kept (`unpurged`) or gone (`expiring`). `INDEXED BY` names the partial index that holds exactly
 * them: SQLite would otherwise pick `webhook_deliveries_pending` for the status and sort, and with it
 * the statement fails rather than scan.
 */
export const unpurgedSlice = (before: Date, limit: number) =>
  sql`SELECT "id" FROM "webhook_deliveries" INDEXED BY "webhook_deliveries_unpurged"
      WHERE "body_purged_at" IS NULL AND "status" IN ('delivered', 'failed') AND "created_at" < ${before.getTime()}
      ORDER BY "created_at" LIMIT ${limit}`;
export const expiringSlice = (before: Date, limit: number) =>
  sql`SELECT "id" FROM "webhook_deliveries" INDEXED BY "webhook_deliveries_expiring"
      WHERE "body_purged_at" IS NOT NULL AND "status" IN ('delivered', 'failed') AND "created_at" < ${before.getTime()}
      ORDER BY "created_at" LIMIT ${limit}`;

/** R2 deletes at most 1,000 keys per call: a body slice never holds more, so it is one R2 call at most. */
export const BODY_SLICE_MAX = 1000;

/** Purges the bodies and sealed secrets of up to `rows` settled deliveries created before `before`, oldest first. */
export async function purgeBodies({ env, db, deps }: Scope, before: Date, rows: number): Promise<number> {
  const limit = Math.min(rows, BODY_SLICE_MAX);
  const expired = unpurgedSlice(before, limit);
  // The R2 key stays on the row (it is not secret) so RETURNING can name the objects to delete.
  const purged = await db
    .update(webhookDeliveries)
    .set({ body: null, sealedSecret: null, bodyPurgedAt: deps.now() })
    .where(sql`${webhookDeliveries.id} IN (${expired})`)
    .returning({ key: webhookDeliveries.bodyKey });
  const keys = purged.flatMap((p) => (p.key ? [p.key] : []));
  if (keys.length > 0) {
    await env.WEBHOOK_BODIES.delete(keys).catch((error: unknown) => {
      // Rows say purged, so nothing reads these objects again; the bucket's lifecycle rule (docs/webhooks.md) removes them.
      log("error", "webhook bodies not deleted from R2", { keys: keys.length, error });
    });
  }
  return purged.length;
}

/** Deletes up to `rows` settled deliveries created before `before` whose bodies are purged, with their attempts: one transaction. */
export async function deleteRecords({ db }: Scope, before: Date, rows: number): Promise<number> {
  const expiring = expiringSlice(before, rows);
  // The attempts first, by the same query in the same transaction (the foreign key's cascade would do
  // it too; saying it keeps the slice's work visible and independent of `PRAGMA foreign_keys`).
  const [, deleted] = await db.batch([
    db.delete(webhookAttempts).where(sql`${webhookAttempts.deliveryId} IN (${expiring})`),
    db
      .delete(webhookDeliveries)
      .where(sql`${webhookDeliveries.id} IN (${expiring})`)
      .returning({ id: webhookDeliveries.id }),
  ]);
  return deleted.length;
}

/** The delivery log's purge steps at `now`: bodies, then records (a record waits for its body). */
export function deliveryLogSteps(scope: Scope): PurgeStep[] {
  const now = scope.deps.now().getTime();
  const { bodiesMs, recordsMs } = scope.config.webhookRetention;
  return [
    {
      name: "webhook_bodies",
      subrequests: 2, // the UPDATE … RETURNING, one R2 delete
      slice: (rows) => purgeBodies(scope, new Date(now - bodiesMs), rows),
    },
    {
      name: "webhook_records",
      subrequests: 1, // one batch
      slice: (rows) => deleteRecords(scope, new Date(now - recordsMs), rows),
    },
  ];
}
