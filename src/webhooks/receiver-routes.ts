import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../auth/access";
import { jsonContent, problems, ProjectParams } from "../platform/openapi";
import { MAX_RECEIVER_CONCURRENCY } from "./lane-capacity";

/** The receiver settings API: what a customer sets for one origin of the project's webhook endpoints. */

/** An origin as `new URL(endpoint).origin` writes it: scheme, host, port; no path, no trailing slash. */
export const ReceiverOrigin = z
  .string()
  .max(300)
  .refine((value) => {
    try {
      const url = new URL(value);
      return (url.protocol === "https:" || url.protocol === "http:") && url.origin === value;
    } catch {
      return false;
    }
  }, "an origin such as https://hooks.example.com (scheme, host and port only, URL-encoded in the path)")
  .openapi({ param: { name: "origin", in: "path" }, example: "https://hooks.example.com" });

export const ReceiverParams = ProjectParams.extend({ origin: ReceiverOrigin });

export const ReceiverSettingsSchema = z
  .object({
    origin: z.string().openapi({ example: "https://hooks.example.com" }),
    concurrency: z
      .number()
      .int()
      .openapi({
        description: `Requests in flight to this receiver at once, 1 (ordered: a delivery's first attempt waits until the one before it settled) to ${MAX_RECEIVER_CONCURRENCY}; 6 when never set.`,
      }),
  })
  .openapi("WebhookReceiverSettings");

export const ReceiverChange = z
  .object({
    concurrency: z
      .number()
      .int()
      .min(1)
      .max(MAX_RECEIVER_CONCURRENCY)
      .openapi({
        description: `1 (ordered) to ${MAX_RECEIVER_CONCURRENCY}. Above 6 the receiver's deliveries are spread over shards of its lane by delivery id.`,
        example: 12,
      }),
  })
  .strict()
  .openapi("WebhookReceiverChange");

export const updateReceiver = createRoute({
  operationId: "updateWebhookReceiver",
  method: "patch",
  path: "/projects/{project_id}/webhook-receivers/{origin}",
  tags: ["Webhooks"],
  ...requires("deliveries:write"),
  summary: "Set a webhook receiver's concurrency",
  description:
    "How many requests the receiver (an origin of the project's webhook endpoints, URL-encoded in the path) gets at once. Its lane applies the change at once to deliveries it has not started; deliveries already spread over shards finish there. Every delivery keeps the specification's promise whatever the setting: at most 3 attempts, at most 5 s between them.",
  request: { params: ReceiverParams, body: jsonContent(ReceiverChange, "The settings to change.") },
  responses: {
    200: jsonContent(ReceiverSettingsSchema, "The receiver's settings after the change."),
    ...problems(400, 401, 403, 404),
  },
});

export type ReceiverSettingsJson = z.infer<typeof ReceiverSettingsSchema>;
