import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../auth/access";
import { DELIVERY_STATUSES } from "../db/schema";
import {
  idParam,
  jsonContent,
  ListQuery,
  listOf,
  problems,
  ProjectParams,
  SCOPED_PROBLEMS,
  Timestamp,
} from "../platform/openapi";

export const AttemptSchema = z
  .object({
    attempt: z.number().int().openapi({ description: "1, 2 or 3." }),
    at: Timestamp,
    status_code: z.number().int().nullable().openapi({ description: "The receiver's HTTP status, when it answered." }),
    error: z.string().nullable().openapi({
      description:
        "Why there is no status: `timeout`, `connection_failed`, `body_missing`, `body_unavailable`, `secret_unreadable`.",
    }),
    duration_ms: z.number().int(),
  })
  .openapi("WebhookAttempt");

export const DeliverySchema = z
  .object({
    delivery_id: z.string().openapi({
      example: "whd_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c",
      description: "This delivery's own id (the `{delivery_id}` of resend, and what `resent_from` names).",
    }),
    request_id: z.string().openapi({
      example: "whd_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c",
      description:
        "`X-Request-Id` and `webhook-id` of every attempt: the message's id, for receivers to de-duplicate. The same as `delivery_id`, except on a resend, which carries its original's (Standard Webhooks).",
    }),
    run_id: z.string(),
    project_id: z.string(),
    endpoint: z.string().openapi({ description: "The receiver's URL (`webhookEndpoint`)." }),
    signed: z.boolean().openapi({ description: "Whether `X-Webhook-Secret` was sent, so attempts are signed." }),
    body_bytes: z.number().int(),
    status: z.enum(DELIVERY_STATUSES).openapi({
      description:
        "`pending` until delivered (2xx) or failed (permanent answer, 3 attempts, or the receiver's `webhook-delivery: abort-message`); `held` while its receiver is paused or disabled (stored, not attempted).",
    }),
    attempts: z.array(AttemptSchema),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable().openapi({
      description:
        "The last attempt's error, or why the delivery ended without one: `enqueue_failed` (neither its lane nor the queue could take it), `run_interrupted` (the run was cut short before its answer), `never_attempted` or `stalled` (settled by the sweeper), `dead_lettered` (the queue gave up on it), `receiver_backlog_full` (its receiver's lane held its bound of undelivered deliveries: recover it once the backlog has drained), `outcome_not_recorded` (the last attempt's outcome could not be written); on a held delivery `receiver_paused` or `receiver_disabled`, and `held_past_retention` for one held longer than bodies are kept.",
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
    completed_at: Timestamp.nullable(),
    resent_from: z.string().nullable().openapi({ description: "The delivery this one resends, if it is a resend." }),
    task_id: z.string().nullable().openapi({
      description: "The receiver task that sent it: a recovery's resend, or a held delivery a resume released.",
    }),
  })
  .openapi("WebhookDelivery");

export const DeliveryQuery = ListQuery.extend({
  run_id: z.string().max(64).optional().openapi({ description: "Only the deliveries of this run." }),
  status: z
    .enum(DELIVERY_STATUSES)
    .optional()
    .openapi({ description: "Only deliveries with this status (`held`: waiting for their receiver's resume)." }),
  origin: z.string().max(300).optional().openapi({
    description: "Only deliveries to this receiver origin (`scheme://host[:port]`, as receivers' health lists it).",
    example: "https://hooks.example.com",
  }),
  from: z.iso
    .datetime({ offset: true })
    .optional()
    .openapi({ description: "Only deliveries made at or after this time (RFC 3339)." }),
  to: z.iso
    .datetime({ offset: true })
    .optional()
    .openapi({ description: "Only deliveries made before this time (RFC 3339)." }),
});

export const listDeliveries = createRoute({
  operationId: "listWebhookDeliveries",
  method: "get",
  path: "/projects/{project_id}/webhook-deliveries",
  tags: ["Webhooks"],
  ...requires("deliveries:read"),
  summary: "List webhook deliveries",
  description:
    "Recent deliveries of run responses, newest first, with every attempt and the last outcome; filtered by run, status, receiver origin and time.",
  request: { params: ProjectParams, query: DeliveryQuery },
  responses: {
    200: jsonContent(listOf(DeliverySchema, "WebhookDeliveryList"), "A page of deliveries, newest first."),
    ...SCOPED_PROBLEMS,
  },
});

export const DeliveryParams = ProjectParams.extend({
  delivery_id: idParam("delivery_id", "whd", "whd_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c"),
});

export const resendDelivery = createRoute({
  method: "post",
  path: "/projects/{project_id}/webhook-deliveries/{delivery_id}/resend",
  operationId: "resendWebhookDelivery",
  tags: ["Webhooks"],
  ...requires("deliveries:write"),
  summary: "Resend a webhook delivery",
  description:
    "Sends the stored body of a delivery again to the same endpoint, as a new delivery (its own `delivery_id`, `resent_from` = this one). It is the same message: `webhook-id` and `X-Request-Id` (`request_id`) are the original's, so a receiver that de-duplicates by them recognises the resend; the timestamp and signature are fresh (signed with the original secret), so receivers' timestamp tolerance passes. Bodies and sealed secrets are kept for `WEBHOOK_BODY_RETENTION_DAYS` (7 by default) after the original delivery was created; after that the answer is 410, and after `WEBHOOK_RECORD_RETENTION_DAYS` (30 by default) the record itself is gone: 404. A delivery still pending, or one that ended before its body reached the queue (`run_interrupted`, `enqueue_failed`, `never_attempted`), has nothing to resend: 409.",
  request: { params: DeliveryParams },
  responses: {
    201: jsonContent(DeliverySchema, "The new delivery, `pending`."),
    ...problems(400, 401, 403, 404, 409, 410),
  },
});
