import { auditAs } from "../audit";
import { and, asc, eq, inArray } from "drizzle-orm";
import { webhookAttempts, webhookDeliveries, type WebhookAttempt, type WebhookDelivery } from "../db/schema";
import { createRouter } from "../platform/router";
import { rfc3339, rfc3339OrNull } from "../platform/openapi";
import { listPage } from "../platform/pagination";
import { resend } from "./resend";
import { setReceiverConcurrency } from "./receiver-concurrency";
import { updateReceiver } from "./receiver-routes";
import { listDeliveries, resendDelivery } from "./routes";

export const deliveryJson = (d: WebhookDelivery, attempts: WebhookAttempt[]) => ({
  delivery_id: d.id,
  request_id: d.messageId ?? d.id,
  run_id: d.runId,
  project_id: d.projectId,
  endpoint: d.endpoint,
  signed: d.signed,
  body_bytes: d.bodyBytes,
  status: d.status,
  attempts: attempts.map((a) => ({
    attempt: a.attempt,
    at: rfc3339(a.at),
    status_code: a.statusCode,
    error: a.error,
    duration_ms: a.durationMs,
  })),
  last_status_code: d.lastStatusCode,
  last_error: d.lastError,
  created_at: rfc3339(d.createdAt),
  updated_at: rfc3339(d.updatedAt),
  completed_at: rfc3339OrNull(d.completedAt),
  resent_from: d.resentFrom,
});

export const webhooksRouter = createRouter()
  .openapi(resendDelivery, async (c) => {
    const { project_id, delivery_id } = c.req.valid("param");
    const created = await resend(c.var.scope, project_id, delivery_id);
    auditAs(c, {
      action: "delivery.resend",
      target: { type: "webhook_delivery", id: delivery_id },
      details: { delivery_id: created.id },
    });
    return c.json(deliveryJson(created, []), 201);
  })
  .openapi(listDeliveries, async (c) => {
    const { project_id } = c.req.valid("param");
    const { limit, cursor, run_id } = c.req.valid("query");
    const db = c.var.scope.db;
    const { items, nextCursor } = await listPage(db, webhookDeliveries, {
      filter: and(
        eq(webhookDeliveries.projectId, project_id),
        run_id ? eq(webhookDeliveries.runId, run_id) : undefined,
      ),
      key: webhookDeliveries.id,
      keyOf: (d) => d.id,
      order: "desc",
      limit,
      cursor,
    });
    const attempts =
      items.length === 0
        ? []
        : await db
            .select()
            .from(webhookAttempts)
            .where(
              inArray(
                webhookAttempts.deliveryId,
                items.map((d) => d.id),
              ),
            )
            .orderBy(asc(webhookAttempts.attempt));
    const byDelivery = Map.groupBy(attempts, (a) => a.deliveryId);
    return c.json(
      { data: items.map((d) => deliveryJson(d, byDelivery.get(d.id) ?? [])), next_cursor: nextCursor },
      200,
    );
  })
  .openapi(updateReceiver, async (c) => {
    const { project_id, origin } = c.req.valid("param");
    const { concurrency } = c.req.valid("json");
    const settings = await setReceiverConcurrency(c.var.scope, project_id, origin, concurrency);
    auditAs(c, {
      action: "webhook_receiver.update",
      target: { type: "webhook_receiver", id: origin },
      details: { concurrency },
    });
    return c.json({ origin: settings.origin, concurrency: settings.concurrency }, 200);
  });
