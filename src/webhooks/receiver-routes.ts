import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../auth/access";
import { RECEIVER_STATES, RECEIVER_TASK_KINDS, RECEIVER_TASK_STATUSES } from "../db/schema";
import { idParam, jsonBodyOf, jsonContent, problems, ProjectParams, Timestamp } from "../platform/openapi";

/** The contract of a receiver's controls: pause, resume, recover and its tasks, and the project's alert settings. */

export const ReceiverParams = ProjectParams.extend({
  origin: z
    .string()
    .min(1)
    .max(300)
    .openapi({
      param: { name: "origin", in: "path" },
      example: "https%3A%2F%2Fhooks.example.com",
      description:
        "The receiver's origin (`scheme://host[:port]` of its endpoints), URL-encoded, as `GET …/webhook-receivers` lists it.",
    }),
});

export const TaskParams = ReceiverParams.extend({
  task_id: idParam("task_id", "wrt", "wrt_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c"),
});

export const ReceiverSchema = z
  .object({
    origin: z.string().openapi({ example: "https://hooks.example.com" }),
    state: z.enum(RECEIVER_STATES).openapi({
      description:
        "`active`; `paused` (by you: new deliveries are held); `disabled` (the receiver said stop, or failed every delivery for the configured span: new deliveries are held). Resume makes it active.",
    }),
    state_cause: z.string().nullable().openapi({ description: "Why it is paused or disabled." }),
    state_changed_at: Timestamp.nullable(),
    failing_since: Timestamp.nullable().openapi({
      description: "Since when its deliveries fail; null while its last settled delivery was delivered.",
    }),
  })
  .openapi("WebhookReceiver");

export const TaskSchema = z
  .object({
    task_id: z.string().openapi({ example: "wrt_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    kind: z.enum(RECEIVER_TASK_KINDS).openapi({
      description: "`recover` (resends what failed in a window) or `release` (sends what was held, on resume).",
    }),
    origin: z.string(),
    status: z.enum(RECEIVER_TASK_STATUSES).openapi({
      description:
        "`counting` (a recovery counts its window first), `sending`, `finished` or `cancelled`. A dry run finishes after counting.",
    }),
    dry_run: z.boolean(),
    since: Timestamp.nullable(),
    until: Timestamp.nullable(),
    counted: z.number().int().openapi({ description: "Deliveries it will send (a recovery: counted before sending)." }),
    sent: z.number().int().openapi({ description: "Deliveries handed to the receiver's lane so far." }),
    delivered: z.number().int().openapi({ description: "Of those sent, delivered." }),
    failed: z.number().int().openapi({ description: "Of those sent, failed again." }),
    pending: z.number().int().openapi({ description: "Of those sent, still on their way." }),
    expired: z.number().int().openapi({
      description: "Failed deliveries of the window whose body is no longer kept (the body retention): not sent.",
    }),
    unsendable: z.number().int().openapi({
      description:
        "Failed deliveries of the window with no body ever stored (`run_interrupted`, `enqueue_failed`, `never_attempted`) or whose secret no longer opens: not sent.",
    }),
    retention_starts_at: Timestamp.openapi({
      description:
        "Bodies of deliveries made before this are no longer kept: what the window had before it is `expired`.",
    }),
    created_at: Timestamp,
    finished_at: Timestamp.nullable(),
  })
  .openapi("WebhookReceiverTask");

export const RecoverBody = z
  .object({
    since: z.iso
      .datetime({ offset: true })
      .openapi({ description: "Deliveries made at or after this time (RFC 3339)." }),
    until: z.iso
      .datetime({ offset: true })
      .optional()
      .openapi({ description: "Deliveries made before this time (RFC 3339). Default: now." }),
    dry_run: z.boolean().default(false).openapi({ description: "Count only: nothing is sent." }),
  })
  .strict();

const RECEIVERS = "/projects/{project_id}/webhook-receivers/{origin}";

export const recoverReceiver = createRoute({
  operationId: "recoverWebhookReceiver",
  method: "post",
  path: `${RECEIVERS}/recover`,
  tags: ["Webhooks"],
  ...requires("deliveries:write"),
  summary: "Recover a receiver's failed deliveries",
  description:
    "Resends every delivery to this receiver made in [`since`, `until`) whose final outcome failed and that was not delivered since (a resend that succeeded counts), each as `resend` does (a new delivery of the same message id, signed afresh), oldest first, at the lane's pace. No cap on their number: a background task works in slices; follow it at `…/tasks/{task_id}`. `dry_run` counts only. The window is bounded by the body retention (7 days): failed deliveries before it are counted as `expired`; a window wholly before it is a 422. One recovery at a time per receiver (409 while one runs).",
  request: { params: ReceiverParams, ...jsonBodyOf(RecoverBody) },
  responses: {
    202: jsonContent(TaskSchema, "The task, `counting`."),
    ...problems(400, 401, 403, 404, 409, 422),
  },
});

export const getReceiverTask = createRoute({
  operationId: "getWebhookReceiverTask",
  method: "get",
  path: `${RECEIVERS}/tasks/{task_id}`,
  tags: ["Webhooks"],
  ...requires("deliveries:write"),
  summary: "A receiver task's progress",
  request: { params: TaskParams },
  responses: { 200: jsonContent(TaskSchema, "The task."), ...problems(400, 401, 403, 404) },
});

export const cancelReceiverTask = createRoute({
  operationId: "cancelWebhookReceiverTask",
  method: "delete",
  path: `${RECEIVERS}/tasks/{task_id}`,
  tags: ["Webhooks"],
  ...requires("deliveries:write"),
  summary: "Cancel a receiver task",
  description:
    "Stops the task's slices: nothing more is sent. Deliveries already handed to the lane go on. A task already over is answered as it is.",
  request: { params: TaskParams },
  responses: {
    200: jsonContent(TaskSchema, "The task, `cancelled` (or as it ended)."),
    ...problems(400, 401, 403, 404),
  },
});

export const pauseReceiver = createRoute({
  operationId: "pauseWebhookReceiver",
  method: "post",
  path: `${RECEIVERS}/pause`,
  tags: ["Webhooks"],
  ...requires("deliveries:write"),
  summary: "Pause a receiver",
  description:
    "New deliveries to this receiver are held (`held`: stored, not attempted, no attempt counted) until it is resumed; deliveries already in their attempts finish them. A hold longer than the body retention ends each delivery `failed` (`held_past_retention`).",
  request: { params: ReceiverParams },
  responses: { 200: jsonContent(ReceiverSchema, "The receiver, `paused`."), ...problems(400, 401, 403, 404) },
});

export const ResumeAnswer = z.object({ receiver: ReceiverSchema, task: TaskSchema }).openapi("WebhookReceiverResumed");

export const resumeReceiver = createRoute({
  operationId: "resumeWebhookReceiver",
  method: "post",
  path: `${RECEIVERS}/resume`,
  tags: ["Webhooks"],
  ...requires("deliveries:write"),
  summary: "Resume (or re-enable) a receiver",
  description:
    "Makes a paused or disabled receiver active and sends what was held, oldest first, at the lane's pace: a `release` task, followed like a recovery's.",
  request: { params: ReceiverParams },
  responses: {
    200: jsonContent(ResumeAnswer, "The receiver, `active`, and the task that sends what was held."),
    ...problems(400, 401, 403, 404),
  },
});

export const WebhookSettingsSchema = z
  .object({
    alert_endpoint: z.string().nullable().openapi({
      description:
        "Where signed events about your receivers go (`webhook.receiver.disabled`, `webhook.delivery.exhausted`, `webhook.recovery.finished`), as deliveries of their own. Null: none.",
      example: "https://alerts.example.com/gateway",
    }),
    alert_signed: z.boolean().openapi({ description: "Whether the events are signed (an `alert_secret` was given)." }),
    auto_recover_hours: z.number().int().nullable().openapi({
      description:
        "Automatic recovery: a receiver whose deliveries failed and that answers 2xx again gets its failed deliveries of the last this many hours recovered. Null: off (the default).",
    }),
  })
  .openapi("WebhookSettings");

export const WebhookSettingsBody = z
  .object({
    alert_endpoint: z.string().max(2048).nullable().optional(),
    alert_secret: z.string().min(1).max(1024).nullable().optional().openapi({
      description: "Signs the events as `X-Webhook-Secret` signs deliveries; stored sealed, never shown again.",
    }),
    auto_recover_hours: z.number().int().min(1).max(168).nullable().optional(),
  })
  .strict();

export const getWebhookSettings = createRoute({
  operationId: "getWebhookSettings",
  method: "get",
  path: "/projects/{project_id}/webhook-settings",
  tags: ["Webhooks"],
  ...requires("deliveries:read"),
  summary: "The project's alert endpoint and automatic recovery",
  request: { params: ProjectParams },
  responses: { 200: jsonContent(WebhookSettingsSchema, "The settings."), ...problems(400, 401, 403, 404) },
});

export const putWebhookSettings = createRoute({
  operationId: "updateWebhookSettings",
  method: "patch",
  path: "/projects/{project_id}/webhook-settings",
  tags: ["Webhooks"],
  ...requires("deliveries:write"),
  summary: "Set the project's alert endpoint and automatic recovery",
  description:
    "Fields left out keep their value; null clears one. The alert endpoint follows the rules of `webhookEndpoint`.",
  request: { params: ProjectParams, ...jsonBodyOf(WebhookSettingsBody) },
  responses: { 200: jsonContent(WebhookSettingsSchema, "The settings."), ...problems(400, 401, 403, 404) },
});

export type ReceiverTaskJson = z.infer<typeof TaskSchema>;
export type ReceiverJson = z.infer<typeof ReceiverSchema>;
