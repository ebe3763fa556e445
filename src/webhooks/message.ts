import { LaneFullError } from "./lane-capacity";
import { z } from "zod";
import type { SealedSecret } from "./secret-box";

const bodyRef = z.union([z.object({ inline: z.string() }), z.object({ r2: z.string().min(1) })]);
const sealed = z.object({ iv: z.string(), ct: z.string() }).nullable();

/**
 * A delivery as the code and a lane's storage hold it: everything an attempt needs, the secret sealed,
 * a large body by reference. It was also the `webhook-deliveries` queue's message until version 2
 * (below): a message of this shape already queued is still read. A change here is a change of what
 * lanes already store: add optional fields only.
 */
export const deliveryMessageV1 = z.object({
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
  body: bodyRef,
  secret: sealed,
}) satisfies z.ZodType<{ secret: SealedSecret | null }>;
export type DeliveryMessage = z.infer<typeof deliveryMessageV1>;

/** Version 2 of the queue's message: the same fields in snake_case, as every queue's message. */
const deliveryMessageV2 = z.object({
  v: z.literal(2),
  id: z.string().min(1),
  message_id: z.string().min(1).optional(),
  project_id: z.string().min(1),
  run_id: z.string().min(1),
  endpoint: z.string().min(1),
  created_at: z.number(),
  body_bytes: z.number().int().nonnegative(),
  body: bodyRef,
  secret: sealed,
});
export type DeliveryQueueMessage = z.infer<typeof deliveryMessageV2>;

/**
 * The contract of the `webhook-deliveries` queue (and its dead-letter queue): what the run path
 * (`handMessageToLane`, when the lane cannot take it) sends, read back as a `DeliveryMessage` by the consumer
 * (`consumer.ts`) before a lane stores it. A claim shares its D1 batch with other deliveries', so a
 * message that could make its statement fail (a missing `created_at` bound as NaN into a NOT NULL
 * column) must be turned away, not written. At-least-once: a message queued by older code may reach
 * new code, so every version sent is read; add optional fields, or a new version for anything else.
 */
export const deliveryMessageSchema = z.discriminatedUnion("v", [
  deliveryMessageV2.transform((m): DeliveryMessage => ({
    v: 1,
    id: m.id,
    ...(m.message_id === undefined ? {} : { messageId: m.message_id }),
    projectId: m.project_id,
    runId: m.run_id,
    endpoint: m.endpoint,
    createdAt: m.created_at,
    bodyBytes: m.body_bytes,
    body: m.body,
    secret: m.secret,
  })),
  deliveryMessageV1,
]);

/** `message` as the queue carries it (version 2). */
export const queueMessageOf = (message: DeliveryMessage): DeliveryQueueMessage => ({
  v: 2,
  id: message.id,
  ...(message.messageId === undefined ? {} : { message_id: message.messageId }),
  project_id: message.projectId,
  run_id: message.runId,
  endpoint: message.endpoint,
  created_at: message.createdAt,
  body_bytes: message.bodyBytes,
  body: message.body,
  secret: message.secret,
});

/** The receiver of an endpoint: its origin (an unparsable endpoint is its own receiver; its attempt fails). */
export function receiverOrigin(endpoint: string): string {
  try {
    return new URL(endpoint).origin;
  } catch {
    // An endpoint is checked before it is stored; an unparsable one still gets a lane.
    return endpoint;
  }
}

/** The name of a receiver's lane (its first shard): its Durable Object id is `idFromName` of it. */
export const receiverLaneName = (projectId: string, origin: string) => `${projectId} ${origin}`;

/** The lane a delivery enters by: its receiver's (project, origin). */
export function laneName(message: Pick<DeliveryMessage, "projectId" | "endpoint">): string {
  return receiverLaneName(message.projectId, receiverOrigin(message.endpoint));
}

/** Shard `k` (≥ 1) of the lane named `lane`; shard 0 is the lane itself. */
export const laneShardName = (lane: string, k: number) => (k === 0 ? lane : `${lane} #${k}`);

/** The lane object named `name` (every lane and shard is addressed by its name, through this). */
export const laneObject = (env: Env, name: string) => env.WEBHOOK_LANES.get(env.WEBHOOK_LANES.idFromName(name));

/**
 * `accept` of the lane named `name`: which messages it stored now. A full lane's refusal (its answer,
 * lane-capacity.ts `LANE_BYTES_MAX`) is thrown here, on the caller's side, as `LaneFullError`, so that
 * a caller that reads only `stored` never takes a refused delivery for a stored one.
 */
export async function acceptInLane(env: Env, name: string, messages: DeliveryMessage[]): Promise<boolean[]> {
  const { stored, refused } = await laneObject(env, name).accept(messages);
  if (refused?.includes(true)) throw new LaneFullError(refused);
  return stored;
}
