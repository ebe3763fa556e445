import { and, eq, isNull, lte, or, sql } from "drizzle-orm";
import { webhookReceivers } from "../db/schema";
import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import { firstInLogs } from "./log";
import type { DeliveryContext } from "./attempt/context";
import type { SentAttempt } from "./attempt/send";
import { alertDisabled, alertExhausted, isAlertDelivery, projectWebhookSettings } from "./alerts";
import { createTask, runningTask, startTask } from "./receiver-tasks";
import type { DeliveryMessage } from "./message";
import { disableReceiver, ORIGIN, originOf, type ReceiverStates, stopCause } from "./receiver-controls";

/**
 * What an attempt's end does to its receiver (docs/webhook-receivers.md "Receivers that say stop"): a
 * receiver that answered 410 Gone or `webhook-delivery: disable` is disabled (once, with an audit
 * entry and an alert); a delivery that ended failed is told to the alert endpoint and marks its
 * receiver failing (the dashboard's banner), one delivered clears the mark. The cron disables a
 * receiver that failed every delivery for `WEBHOOK_RECEIVER_DISABLE_AFTER_HOURS`.
 */

/** The lane's delivery context as a scope for the alerts (which write a delivery of their own and hand it to its lane). */
const scopeOf = (ctx: DeliveryContext): Scope => ({
  requestId: "lane",
  env: ctx.env,
  ctx: { waitUntil: () => undefined },
  config: ctx.config,
  db: ctx.db,
  deps: ctx.deps,
});

/** After an attempt is written: the receiver's stop, and a failed delivery's alert. Never throws (logs). */
export async function afterAttempt(
  ctx: DeliveryContext,
  message: DeliveryMessage,
  sent: SentAttempt,
  states?: ReceiverStates,
): Promise<void> {
  try {
    const scope = scopeOf(ctx);
    if (sent.says === "disable") {
      const origin = originOf(message.endpoint);
      const cause = stopCause(sent);
      states?.set(message.projectId, origin, "disabled");
      // The alert endpoint's own receiver is disabled like any other, but never alerts about itself.
      await disableReceiver(scope, message.projectId, origin, cause, (at) =>
        isAlertDelivery(message.runId) ? Promise.resolve() : alertDisabled(scope, message.projectId, origin, cause, at),
      );
    }
    // What needs the project's settings (one D1 read per project and isolate every 30 s) is the lane's:
    // a delivery driven outside a lane (tests of the attempt's steps) reads nothing more.
    if (!states) return;
    if (sent.outcome === "delivered" || sent.outcome === "failed")
      await states.settled(ctx.db, message.projectId, originOf(message.endpoint), sent.outcome, ctx.deps.now());
    if (sent.outcome === "delivered") await autoRecover(scope, message);
    if (sent.outcome === "failed")
      await alertExhausted(scope, message, {
        attempts: sent.attempt,
        statusCode: sent.statusCode,
        error: sent.error,
        reason: sent.reason,
      });
  } catch (error) {
    log("error", "webhook receiver stop not recorded", {
      delivery_id: message.id,
      project_id: message.projectId,
      error,
    });
  }
}

/** A receiver is looked at for automatic recovery at most this often per isolate. */
const AUTO_RECOVER_EVERY_MS = 60_000;
const autoRecoverLooked = new Map<string, number>();

/**
 * Opt-in automatic recovery (`auto_recover_hours`): a receiver that answered 2xx and has failed
 * deliveries of the last N hours whose message was not delivered since gets a recovery of them, as if
 * recover had been called, unless one runs. Cheap when off: the project's settings, cached.
 */
async function autoRecover(scope: Scope, message: DeliveryMessage): Promise<void> {
  if (isAlertDelivery(message.runId)) return;
  const settings = await projectWebhookSettings(scope, message.projectId);
  if (!settings?.autoRecoverHours) return;
  const origin = originOf(message.endpoint);
  const key = `${message.projectId} ${origin}`;
  const looked = autoRecoverLooked.get(key);
  if (looked !== undefined && Date.now() - looked < AUTO_RECOVER_EVERY_MS) return;
  autoRecoverLooked.set(key, Date.now());
  const now = scope.deps.now().getTime();
  const since = now - settings.autoRecoverHours * 3_600_000;
  // In its project's logs (then D1): a resend is in its original's log, so the NOT EXISTS stays in one.
  const failing = await firstInLogs(scope, message.projectId, (db) =>
    db.all<{ id: string }>(sql`
    SELECT id FROM webhook_deliveries WHERE project_id = ${message.projectId} AND ${ORIGIN} = ${origin}
      AND created_at >= ${since} AND status = 'failed'
      AND (body IS NOT NULL OR body_key IS NOT NULL) AND body_purged_at IS NULL
      -- Never recovered yet: a message a recovery already resent and that failed again does not start another.
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.project_id = webhook_deliveries.project_id
        AND e.message_id = webhook_deliveries.message_id AND (e.status != 'failed' OR e.task_id IS NOT NULL))
    LIMIT 1`),
  );
  if (!failing) return;
  if (await runningTask(scope, message.projectId, origin, "recover")) return;
  const task = await createTask(scope, {
    projectId: message.projectId,
    origin,
    kind: "recover",
    dryRun: false,
    since: new Date(since),
    until: new Date(now),
    createdBy: "auto-recovery",
  });
  await startTask(scope.env, task.id);
  log("info", "webhook receiver recovered automatically", { project_id: message.projectId, origin, task_id: task.id });
}

/** Receivers disabled per cron run at most (a bigger backlog goes on at the next run). */
const FAILING_CANDIDATES = 100;

/**
 * Disables each active receiver whose every delivery failed for `spanMs`: its lanes marked it failing
 * (`failing_since`, the first failure after its last delivery, cleared by the next delivery:
 * receiver-controls.ts `settled`) at least `spanMs` ago, and its state has not changed since then (a
 * resumed receiver gets a span anew). Read from the control plane alone (a scan of
 * * the receivers that have a row: one per receiver whose settings changed or that failed), never from the
 * delivery log, which lives per project (webhooks/log.ts) and could not be scanned across projects. A
 * receiver that had no delivery since it was marked counts as still failing: every delivery it had in the
 * span failed; disabled, its next deliveries are held, not lost, and its customer is alerted.
 */
export async function disableFailing(scope: Scope, spanMs: number): Promise<number> {
  const before = new Date(scope.deps.now().getTime() - spanMs);
  const failing = await scope.db
    .select({ projectId: webhookReceivers.projectId, origin: webhookReceivers.origin })
    .from(webhookReceivers)
    .where(
      and(
        eq(webhookReceivers.state, "active"),
        lte(webhookReceivers.failingSince, before),
        or(isNull(webhookReceivers.stateChangedAt), lte(webhookReceivers.stateChangedAt, before)),
      ),
    )
    .orderBy(webhookReceivers.failingSince)
    .limit(FAILING_CANDIDATES);
  let disabled = 0;
  const hours = Math.round(spanMs / 3_600_000);
  const cause = `every delivery failed for ${hours} hours`;
  for (const { projectId, origin } of failing)
    if (
      await disableReceiver(scope, projectId, origin, cause, (at) => alertDisabled(scope, projectId, origin, cause, at))
    )
      disabled++;
  return disabled;
}
