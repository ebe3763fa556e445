import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import { logDbOf } from "./log";
import { settleAndAck } from "./dead-letter";
import { LaneFullError } from "./lane-capacity";
import { acceptInLane, type DeliveryMessage, deliveryMessageSchema, laneName } from "./message";

/**
 * The `webhook-deliveries` consumer: hands each delivery to its lane (lane.ts, `accept`) and acks it
 * once the lane has stored it. Its time per batch is one Durable Object call per lane the batch
 * touches, whatever the receivers do: Queues decide consumer concurrency after a batch ends, so a
 * batch held by a slow receiver would hold every delivery queued behind it. A delivery its lane did
 * not accept is retried by the queue and, past `max_retries`, ends in the dead-letter queue
 * (dead-letter.ts); one its lane refused for being full (lane-capacity.ts `LANE_BYTES_MAX`) is settled
 * `failed` at once (`receiver_backlog_full`): retries would find it as full.
 */
export async function consumeDeliveries(batch: MessageBatch<unknown>, scope: Scope): Promise<void> {
  const { env, deps } = scope;
  const lanes = new Map<string, { msg: Message<unknown>; message: DeliveryMessage }[]>();
  for (const msg of batch.messages) {
    const parsed = deliveryMessageSchema.safeParse(msg.body);
    if (!parsed.success) {
      log("error", "unreadable webhook message dropped", {
        queue: batch.queue,
        message_id: msg.id,
        issues: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`),
      });
      msg.ack();
      continue;
    }
    const name = laneName(parsed.data);
    lanes.set(name, [...(lanes.get(name) ?? []), { msg, message: parsed.data }]);
  }
  await Promise.all(
    [...lanes].map(async ([name, entries]) => {
      try {
        // In the batch's order: a lane drains its backlog in order of arrival.
        await acceptInLane(
          env,
          name,
          entries.map((e) => e.message),
        );
        for (const { msg } of entries) msg.ack();
      } catch (error) {
        if (error instanceof LaneFullError) {
          // Refused: settled failed at once (retries would find the lane as full); the rest (a shard
          // not full) were stored: acked.
          for (const [i, { msg, message }] of entries.entries())
            if (!error.refused[i]) msg.ack();
            else
              await settleAndAck(logDbOf(scope, message.projectId, message.id), deps.now(), msg, message, {
                reason: "receiver_backlog_full",
                why: "its receiver's lane is full: its backlog holds LANE_BYTES_MAX",
                notSettled: "webhook delivery refused by its full lane not settled",
              });
          return;
        }
        for (const { msg, message } of entries) {
          log("error", "webhook delivery not accepted by its lane", {
            queue: batch.queue,
            delivery_id: message.id,
            project_id: message.projectId,
            message_id: msg.id,
            queue_attempts: msg.attempts,
            error,
          });
          msg.retry({ delaySeconds: 1 });
        }
      }
    }),
  );
}
