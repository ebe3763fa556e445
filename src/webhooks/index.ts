import { auditAs } from "../audit";
import { and, asc, eq, gte, inArray, lt, sql } from "drizzle-orm";
import { invalidField } from "../platform/errors";
import { ORIGIN } from "./receiver-controls";
import { webhookAttempts, webhookDeliveries, type WebhookAttempt, type WebhookDelivery } from "../db/schema";
import { createRouter } from "../platform/router";
import { rfc3339, rfc3339OrNull } from "../platform/openapi";
import { encodeCursor, listPage } from "../platform/pagination";
import { inEachLog } from "./log";
import { resend } from "./resend";
import { setReceiverConcurrency } from "./receiver-concurrency";
import { updateReceiver } from "./receiver-settings-routes";
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
  task_id: d.taskId,
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
    const { limit, cursor, run_id, status, origin, from, to } = c.req.valid("query");
    let receiver: string | undefined;
    if (origin !== undefined) {
      try {
        receiver = new URL(origin).origin;
      } catch {
        throw invalidField("query", "origin", "is not an origin such as https://hooks.example.com");
      }
    }
    const filter = and(
      eq(webhookDeliveries.projectId, project_id),
      run_id ? eq(webhookDeliveries.runId, run_id) : undefined,
      status ? eq(webhookDeliveries.status, status) : undefined,
      receiver === undefined ? undefined : sql`${ORIGIN} = ${receiver}`,
      from === undefined ? undefined : gte(webhookDeliveries.createdAt, new Date(from)),
      to === undefined ? undefined : lt(webhookDeliveries.createdAt, new Date(to)),
    );
    // Each store's page (D1's, or each log's and D1's: webhooks/log.ts), merged by id, newest first; a
    // record in a log and in D1 (one sent across the upgrade) is the log's. At most 6 asked at once.
    const pages = await inEachLog(
      c.var.scope,
      project_id,
      async (db) => {
        const { items, nextCursor } = await listPage(db, webhookDeliveries, {
          filter,
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
        return {
          rows: items.map((d) => ({ ...d, attempts: byDelivery.get(d.id) ?? [] })),
          more: nextCursor !== null,
        };
      },
      run_id,
    );
    const seen = new Set<string>();
    const merged = pages
      .flatMap((p) => p.rows)
      .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
      .filter((d) => !seen.has(d.id) && seen.add(d.id));
    const items = merged.slice(0, limit);
    const last = items.at(-1);
    const nextCursor = last && (merged.length > limit || pages.some((p) => p.more)) ? encodeCursor(last.id) : null;
    return c.json({ data: items.map((d) => deliveryJson(d, d.attempts)), next_cursor: nextCursor }, 200);
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
