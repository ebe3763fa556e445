import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import { deliveryMessageSchema } from "./enqueue";
import { laneName } from "./lane";

/**
 * The `webhook-deliveries` consumer: hands each delivery to its lane (lane.ts) and acks it once the
 * lane has stored it. Its time per delivery is one Durable Object call, whatever the receiver does:
 * Queues decide consumer concurrency after a batch ends, so a batch held by a slow receiver would hold
 * every delivery queued behind it. A hand-off that fails is retried by the queue and, past
 * `max_retries`, ends in the dead-letter queue (dead-letter.ts).
 */
export async function handOffDeliveries(batch: MessageBatch<unknown>, { env }: Scope): Promise<void> {
  await Promise.all(
    batch.messages.map(async (msg) => {
      const parsed = deliveryMessageSchema.safeParse(msg.body);
      if (!parsed.success) {
        log("error", "unreadable webhook message dropped", { queue: batch.queue, message_id: msg.id, issues: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`) });
        return msg.ack();
      }
      const message = parsed.data;
      try {
        const lane = env.WEBHOOK_LANES.get(env.WEBHOOK_LANES.idFromName(laneName(message)));
        await lane.handOff(message);
        msg.ack();
      } catch (error) {
        log("error", "webhook hand-off to its lane failed", { queue: batch.queue, delivery_id: message.id, project_id: message.projectId, message_id: msg.id, queue_attempts: msg.attempts, error });
        msg.retry({ delaySeconds: 1 });
      }
    }),
  );
}
