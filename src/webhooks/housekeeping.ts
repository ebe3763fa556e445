import { and, eq, lt, sql } from "drizzle-orm";
import { webhookDeliveries } from "../db/schema";
import type { Scope } from "../platform/scope";
import { logFailure } from "./deliver";
import { SWEPT_REASONS } from "./policy";
import { expireHeld } from "./receiver-controls";
import { disableFailing } from "./receiver-stops";
import { purgeBodies } from "./retention";

const [NEVER_ATTEMPTED, STALLED] = SWEPT_REASONS;

/**
 * The webhook side of the `*\/30` cron: the sweeper and the retention purge. Three subrequests
 * (two D1 statements, one R2 call), beside the domain cron's ≤ 38 in the same invocation (Workers
 * Free: 50).
 */

/**
 * A delivery still `pending` this long after its last change is settled `failed`. Its normal life
 * is far shorter: the run (≤ RUN_TIMEOUT_MS, 2 min by default), the queue's wait, 3 attempts of
 * ≤ WEBHOOK_TIMEOUT_MS with ≤ 5 s between them, and a few queue redeliveries after a crash.
 */
export const STALE_AFTER_MS = 30 * 60 * 1000;
/**
 * Bodies and sealed secrets are kept this long after a delivery is created, for resending; then purged
 * (resend: 410). The default of `WEBHOOK_BODY_RETENTION_DAYS` (`config.webhookRetention.bodiesMs`).
 */
export const RETENTION_MS = 7 * 24 * 3600 * 1000;
/** Rows settled or purged per cron run, each in one statement (a bigger backlog goes on at the next run). */
export const SWEEP_LIMIT = 1000;
/** R2 deletes up to 1000 keys per call: one subrequest. */
export const PURGE_LIMIT = 1000;

/** Settles deliveries left `pending` too long: `never_attempted` (the run or its enqueue was cut short) or `stalled`. */
export async function sweepStalled({ db, deps }: Scope): Promise<number> {
  const now = deps.now();
  const stale = db
    .select({ id: webhookDeliveries.id })
    .from(webhookDeliveries)
    .where(
      and(
        eq(webhookDeliveries.status, "pending"),
        lt(webhookDeliveries.updatedAt, new Date(now.getTime() - STALE_AFTER_MS)),
      ),
    )
    .limit(SWEEP_LIMIT);
  const settled = await db
    .update(webhookDeliveries)
    .set({
      status: "failed",
      lastError: sql`CASE WHEN ${webhookDeliveries.attemptCount} = 0 THEN ${NEVER_ATTEMPTED} ELSE ${STALLED} END`,
      updatedAt: now,
      completedAt: now,
    })
    .where(and(sql`${webhookDeliveries.id} IN ${stale}`, eq(webhookDeliveries.status, "pending")))
    .returning();
  for (const d of settled) {
    logFailure(d, d.attemptCount, `still pending after ${STALE_AFTER_MS / 60_000} minutes`, {
      statusCode: d.lastStatusCode,
      error: d.lastError,
    });
  }
  return settled.length;
}

/**
 * One slice of the body purge (src/webhooks/retention.ts), as this cron always made; the `* * * * *`
 * cron drains the rest (src/retention.ts).
 */
export async function purgeExpired(scope: Scope): Promise<number> {
  const before = new Date(scope.deps.now().getTime() - scope.config.webhookRetention.bodiesMs);
  return purgeBodies(scope, before, PURGE_LIMIT);
}

/** The webhook part of the cron. */
export async function webhookHousekeeping(scope: Scope): Promise<{ swept: number; purged: number }> {
  return { swept: await sweepStalled(scope), purged: await purgeExpired(scope) };
}

/**
 * The receivers' part of the `*\/30` cron: held deliveries past the body retention end `failed`, and
 * receivers that failed every delivery for the configured span are disabled.
 */
export async function receiverHousekeeping(scope: Scope): Promise<{ expired: number; disabled: number }> {
  const expired = await expireHeld(scope, scope.config.webhookRetention.bodiesMs);
  const disabled = await disableFailing(scope, scope.config.receiverDisableAfterMs);
  return { expired, disabled };
}
