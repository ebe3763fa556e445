import { and, eq } from "drizzle-orm";
import { webhookDeliveries, type WebhookDelivery } from "../db/schema";
import { ApiError } from "../platform/errors";
import type { Scope } from "../platform/scope";
import { checkOutboundUrl } from "../platform/url-policy";
import { handToLane, writePendingDelivery } from "./enqueue";
import { logDbOf } from "./log";
import { openSecret, type SealedSecret } from "./secret-box";

/** Why a delivery ends without its body ever reaching the consumer, which is what stores it for resending. */
const NEVER_QUEUED = new Set(["run_interrupted", "enqueue_failed", "never_attempted"]);

/**
 * A new delivery of `deliveryId`'s stored body to the same endpoint: its own record (`resent_from`)
 * and its secret sealed again under the record's id, but the original's message id in `webhook-id`
 * and `X-Request-Id` (Standard Webhooks: a resent message keeps its id), with a fresh timestamp and
 * signature at each attempt.
 */
export async function resend(scope: Scope, projectId: string, deliveryId: string): Promise<WebhookDelivery> {
  const { env, config } = scope;
  const original = await deliveryById(scope, projectId, deliveryId);
  if (!original) throw new ApiError("not_found", `No webhook delivery '${deliveryId}' in project '${projectId}'.`);
  const purged = new ApiError(
    "gone",
    `The body of delivery '${deliveryId}' is no longer kept: bodies and secrets are kept ${config.webhookRetention.bodiesMs / 86_400_000} days for resending.`,
  );
  if (original.bodyPurgedAt) throw purged;
  if (original.body === null && original.bodyKey === null) {
    // Pending and not yet handed to the consumer (which stores the body), ended before it ever was, or
    // from before bodies were kept.
    if (original.status === "pending")
      throw new ApiError("conflict", `Delivery '${deliveryId}' has not been attempted yet; resend it once it has.`);
    if (original.lastError !== null && NEVER_QUEUED.has(original.lastError)) {
      throw new ApiError(
        "conflict",
        `Delivery '${deliveryId}' ended before its body reached the queue (${original.lastError}): there is no body to resend.`,
      );
    }
    throw purged;
  }
  const check = checkOutboundUrl(original.endpoint, { allowInsecure: config.allowInsecureTargets });
  if (!check.ok) throw new ApiError("conflict", `The delivery's endpoint is no longer allowed: it ${check.reason}.`);

  let secret: string | undefined;
  if (original.signed) {
    if (!original.sealedSecret) throw purged;
    try {
      secret = await openSecret(
        config.webhookEncryptionKey,
        original.id,
        JSON.parse(original.sealedSecret) as SealedSecret,
        config.previous.webhookEncryptionKey,
      );
    } catch {
      // Never resend a signed delivery unsigned.
      throw new ApiError(
        "conflict",
        "The delivery's signing secret can no longer be read (WEBHOOK_ENCRYPTION_KEY changed?).",
      );
    }
  }
  let body = original.body;
  if (body === null) {
    const object = await env.WEBHOOK_BODIES.get(original.bodyKey!);
    if (!object) throw purged;
    body = await object.text();
  }

  const pending = await writePendingDelivery(
    scope,
    { projectId, appName: original.appName ?? undefined, runId: original.runId, endpoint: original.endpoint, secret },
    { resentFrom: { id: original.id, messageId: original.messageId ?? original.id } },
  );
  if (!pending.recorded) throw new ApiError("service_unavailable", "The delivery could not be recorded; try again.");
  await handToLane(scope, pending, body);
  return (await deliveryById(scope, projectId, pending.id))!;
}

/** Delivery `deliveryId` of `projectId`: in its log (webhooks/log.ts), else in D1, which recorded deliveries before the logs did. */
export async function deliveryById(
  scope: Scope,
  projectId: string,
  deliveryId: string,
): Promise<WebhookDelivery | undefined> {
  const byId = (db: Scope["db"]) =>
    db
      .select()
      .from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.projectId, projectId)));
  const [row] = await byId(logDbOf(scope, projectId, deliveryId));
  if (row || scope.config.deliveryLogStore !== "objects") return row;
  return (await byId(scope.db))[0];
}
