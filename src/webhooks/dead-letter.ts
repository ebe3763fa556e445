import type { Scope } from "../platform/scope";
import { logFailure } from "./deliver";
import { deliveryMessageSchema } from "./message";
import { failPending } from "./store";
import { log } from "../platform/log";

/**
 * The `webhook-deliveries-dlq` consumer. A message lands here after its lane did not accept it
 * `max_retries` times (the Durable Object unavailable, invocations that kept dying): its delivery is settled
 * `failed` (`dead_lettered`) with one log line, unless it was settled meanwhile.
 */
export async function settleDeadLetters(batch: MessageBatch<unknown>, { db, deps }: Scope): Promise<void> {
  for (const msg of batch.messages) {
    const parsed = deliveryMessageSchema.safeParse(msg.body);
    const message = parsed.success ? parsed.data : null;
    if (message === null) {
      log("error", "unreadable dead-lettered webhook message dropped", { message_id: msg.id });
      msg.ack();
      continue;
    }
    try {
      const settled = await failPending(db, message.id, deps.now(), "dead_lettered");
      if (settled) {
        logFailure(
          { id: message.id, runId: message.runId, projectId: message.projectId, endpoint: message.endpoint },
          settled.attempts,
          "dead-lettered: the queue gave up on it",
        );
      }
      msg.ack();
    } catch (error) {
      // D1 still down: try later; past this queue's own retries the sweeper settles the row.
      log("error", "dead-lettered webhook not settled", { delivery_id: message.id, error });
      msg.retry({ delaySeconds: 30 });
    }
  }
}
