import { eq } from "drizzle-orm";
import { webhookDeliveries } from "../db/schema";
import { newId } from "../platform/ids";
import type { Scope } from "../platform/scope";
import { INLINE_BODY_MAX_BYTES } from "./policy";
import { type SealedSecret, sealSecret } from "./secret-box";

/** What travels through the queue: everything the consumer needs, the secret sealed, a large body by reference. */
export interface DeliveryMessage {
  v: 1;
  id: string;
  projectId: string;
  runId: string;
  endpoint: string;
  createdAt: number;
  bodyBytes: number;
  body: { inline: string } | { r2: string };
  secret: SealedSecret | null;
}

export interface DeliveryRequest {
  projectId: string;
  runId: string;
  endpoint: string;
  secret: string | undefined;
  /** The exact bytes returned to the caller. */
  body: string;
}

export const SEND_TRIES = 3;
export const bodyKey = (deliveryId: string) => `webhook-bodies/${deliveryId}`;

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function logError(msg: string, fields: Record<string, unknown>) {
  console.error(JSON.stringify({ level: "error", msg, ...fields }));
}

/**
 * Records a delivery and hands it to the queue. Runs in `waitUntil` after the caller has its answer,
 * so it never throws: a failed send is retried, and if the queue stays unavailable the record says
 * `failed` with the reason, so nothing is lost silently.
 */
export async function enqueueDelivery(scope: Scope, request: DeliveryRequest): Promise<string> {
  const { env, config, deps, db } = scope;
  const now = deps.now();
  const id = newId("whd", now.getTime());
  const bodyBytes = new TextEncoder().encode(request.body).byteLength;
  const log = { delivery_id: id, run_id: request.runId, project_id: request.projectId };
  try {
    await db.insert(webhookDeliveries).values({
      id,
      projectId: request.projectId,
      runId: request.runId,
      endpoint: request.endpoint,
      signed: request.secret !== undefined,
      bodyBytes,
      status: "pending",
      createdAt: now,
      updatedAt: now,
    });
  } catch (error) {
    // The consumer writes the record when it first sees the message; carry on.
    logError("webhook delivery record not written at enqueue", { ...log, error: String(error) });
  }

  let lastError: unknown;
  for (let attempt = 1; attempt <= SEND_TRIES; attempt++) {
    try {
      let body: DeliveryMessage["body"];
      if (bodyBytes <= INLINE_BODY_MAX_BYTES) {
        body = { inline: request.body };
      } else {
        await env.WEBHOOK_BODIES.put(bodyKey(id), request.body, { httpMetadata: { contentType: "application/json" } });
        body = { r2: bodyKey(id) };
      }
      const message: DeliveryMessage = {
        v: 1,
        id,
        projectId: request.projectId,
        runId: request.runId,
        endpoint: request.endpoint,
        createdAt: now.getTime(),
        bodyBytes,
        body,
        secret: request.secret === undefined ? null : await sealSecret(config.webhookEncryptionKey, id, request.secret),
      };
      await env.WEBHOOK_QUEUE.send(message, { contentType: "json" });
      return id;
    } catch (error) {
      lastError = error;
      if (attempt < SEND_TRIES) await wait(100 * 2 ** attempt);
    }
  }
  logError("webhook delivery could not be enqueued", { ...log, endpoint_host: new URL(request.endpoint).host, error: String(lastError) });
  if (bodyBytes > INLINE_BODY_MAX_BYTES) await env.WEBHOOK_BODIES.delete(bodyKey(id)).catch(() => undefined);
  try {
    const at = deps.now();
    await db
      .update(webhookDeliveries)
      .set({ status: "failed", lastError: "enqueue_failed", updatedAt: at, completedAt: at })
      .where(eq(webhookDeliveries.id, id));
  } catch (error) {
    logError("webhook delivery failure not recorded", { ...log, error: String(error) });
  }
  return id;
}
