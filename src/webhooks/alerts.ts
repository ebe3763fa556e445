import { eq } from "drizzle-orm";
import { type WebhookProjectSettings, webhookProjectSettings, type WebhookReceiverTask } from "../db/schema";
import { newId } from "../platform/ids";
import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import { handNewDeliveryToLane } from "./enqueue";
import type { DeliveryMessage } from "./message";
import { originOf } from "./receiver-controls";
import type { OnFinished } from "./receiver-tasks";
import { openSecret, type SealedSecret } from "./secret-box";

/**
 * The customer is told (docs/webhook-receivers.md "Alerts"): a project may name an alert endpoint that
 * receives signed events about its receivers. An event is a delivery like any other (the same record,
 * signing, lane and outcome table), whose `run_id` is the event's id (`evt_…`). Never an alert about
 * an alert: nothing is raised about a delivery that is an event, nor about the alert endpoint's own
 * receiver (its failure, its disable), so a failing alert endpoint cannot feed itself.
 */

export const ALERT_EVENTS = [
  "webhook.receiver.disabled",
  "webhook.delivery.exhausted",
  "webhook.recovery.finished",
] as const;
export type AlertEvent = (typeof ALERT_EVENTS)[number];

/** An event's delivery carries its id as its `run_id`: how an alert is told apart from a run's delivery. */
export const isAlertDelivery = (runId: string) => runId.startsWith("evt_");

/** A project's settings read by this isolate, each for SETTINGS_TTL_MS: a failing receiver's deliveries do not read them once each. */
const SETTINGS_TTL_MS = 30_000;
/** The read itself is kept, so deliveries that finish together share one D1 round trip. */
const settingsRead = new Map<string, { settings: Promise<WebhookProjectSettings | null>; at: number }>();

/** A project's webhook settings (alert endpoint, automatic recovery), read at most once per SETTINGS_TTL_MS per isolate. */
export async function projectWebhookSettings(
  scope: Pick<Scope, "db">,
  projectId: string,
  fresh = false,
): Promise<WebhookProjectSettings | null> {
  const known = settingsRead.get(projectId);
  if (!fresh && known && Date.now() - known.at < SETTINGS_TTL_MS) return known.settings;
  const settings = scope.db
    .select()
    .from(webhookProjectSettings)
    .where(eq(webhookProjectSettings.projectId, projectId))
    .then(([row]) => row ?? null);
  settingsRead.set(projectId, { settings, at: Date.now() });
  // A failed read is not kept: the next caller reads again.
  settings.catch(() => settingsRead.delete(projectId));
  return settings;
}

export const forgetProjectWebhookSettings = (projectId: string) => settingsRead.delete(projectId);

/**
 * Sends `type` with `data` to the project's alert endpoint, if it has one and the event is not about
 * the alert endpoint's own receiver. Never throws: an alert that cannot be sent is a log line.
 */
export async function raiseAlert(
  scope: Scope,
  projectId: string,
  type: AlertEvent,
  data: Record<string, unknown> & { origin: string },
): Promise<string | null> {
  try {
    const settings = await projectWebhookSettings(scope, projectId);
    if (!settings?.alertEndpoint) return null;
    if (originOf(settings.alertEndpoint) === data.origin) return null;
    const at = scope.deps.now();
    const id = newId("evt", at.getTime());
    const secret =
      settings.alertSecret === null
        ? undefined
        : await openSecret(
            scope.config.webhookEncryptionKey,
            projectId,
            JSON.parse(settings.alertSecret) as SealedSecret,
            scope.config.previous.webhookEncryptionKey,
          );
    const body = JSON.stringify({ id, type, timestamp: at.toISOString(), project_id: projectId, data });
    await handNewDeliveryToLane(scope, { projectId, runId: id, endpoint: settings.alertEndpoint, secret, body });
    return id;
  } catch (error) {
    log("error", "webhook alert not sent", { project_id: projectId, type, error });
    return null;
  }
}

/** At most one `webhook.delivery.exhausted` per receiver and isolate in this span; the others are counted into the next. */
const EXHAUSTED_EVERY_MS = 60_000;
const exhaustedSent = new Map<string, { at: number; suppressed: number }>();

/** A delivery that ended failed: `webhook.delivery.exhausted`, unless it is an alert itself (or the span's one was sent). */
export async function alertExhausted(
  scope: Scope,
  message: Pick<DeliveryMessage, "id" | "projectId" | "runId" | "endpoint" | "messageId">,
  last: { attempts: number; statusCode: number | null; error: string | null; reason: string },
): Promise<void> {
  if (isAlertDelivery(message.runId)) return;
  const origin = originOf(message.endpoint);
  const key = `${message.projectId} ${origin}`;
  const now = Date.now();
  const seen = exhaustedSent.get(key);
  if (seen && now - seen.at < EXHAUSTED_EVERY_MS) {
    seen.suppressed++;
    return;
  }
  exhaustedSent.set(key, { at: now, suppressed: 0 });
  await raiseAlert(scope, message.projectId, "webhook.delivery.exhausted", {
    origin,
    delivery_id: message.id,
    request_id: message.messageId ?? message.id,
    run_id: message.runId,
    attempts: last.attempts,
    last_status_code: last.statusCode,
    last_error: last.error,
    reason: last.reason,
    // Failed deliveries of this receiver not alerted one by one since the previous event.
    not_alerted_since_previous: seen?.suppressed ?? 0,
  });
}

export async function alertDisabled(scope: Scope, projectId: string, origin: string, cause: string, at: Date) {
  await raiseAlert(scope, projectId, "webhook.receiver.disabled", { origin, cause, disabled_at: at.toISOString() });
}

/** The recovery's end, told to the alert endpoint (`webhook.recovery.finished`); a dry run and a release tell nothing. */
export const receiverTaskFinished =
  (scope: Scope): OnFinished =>
  async (task: WebhookReceiverTask) => {
    if (task.kind !== "recover" || task.dryRun) return;
    await raiseAlert(scope, task.projectId, "webhook.recovery.finished", {
      origin: task.origin,
      task_id: task.id,
      counted: task.counted,
      sent: task.sent,
      expired: task.expired,
      unsendable: task.unsendable,
    });
  };
