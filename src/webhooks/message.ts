import { z } from "zod";
import type { SealedSecret } from "./secret-box";

/**
 * The contract of the `webhook-deliveries` queue: what the run path (`enqueue.ts`) sends and the
 * consumer (`consumer.ts`) passes to a lane. Everything an attempt needs, the secret sealed, a large
 * body by reference. The consumer checks each message against this before a lane stores it: a claim
 * shares its D1 batch with other deliveries', so a message that could make its statement fail (a
 * missing `createdAt` bound as NaN into a NOT NULL column) must be turned away, not written. A change
 * here is a change of what is already waiting in queues and lanes: add optional fields, bump `v` for
 * anything else.
 */
export const deliveryMessageSchema = z.object({
  v: z.literal(1),
  id: z.string().min(1),
  // The Standard Webhooks id receivers see (`webhook-id`, `X-Request-Id`): the delivery's own id, or
  // on a resend the original's. Absent from messages queued before it existed: then `id`.
  messageId: z.string().min(1).optional(),
  projectId: z.string().min(1),
  runId: z.string().min(1),
  endpoint: z.string().min(1),
  createdAt: z.number(),
  bodyBytes: z.number().int().nonnegative(),
  body: z.union([z.object({ inline: z.string() }), z.object({ r2: z.string().min(1) })]),
  secret: z.object({ iv: z.string(), ct: z.string() }).nullable(),
}) satisfies z.ZodType<{ secret: SealedSecret | null }>;
export type DeliveryMessage = z.infer<typeof deliveryMessageSchema>;

/** The lane's name: its Durable Object id is `idFromName` of it. */
export function laneName(message: Pick<DeliveryMessage, "projectId" | "endpoint">): string {
  let origin: string;
  try {
    origin = new URL(message.endpoint).origin;
  } catch {
    // An endpoint is checked before it is stored; an unparsable one still gets a lane (its attempt fails).
    origin = message.endpoint;
  }
  return `${message.projectId} ${origin}`;
}
