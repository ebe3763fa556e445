import type { Scope } from "../platform/scope";
import { logFailure } from "./deliver";
import { type DeliveryMessage, deliveryMessageSchema } from "./message";
import { logDbOf } from "./log";
import { failPending } from "./store";
import { log } from "../platform/log";

/**
 * The `webhook-deliveries-dlq` consumer. A message lands here after its lane did not accept it
 * `max_retries` times (the Durable Object unavailable, invocations that kept dying): its delivery is settled
 * `failed` (`dead_lettered`) with one log line, unless it was settled meanwhile.
 */
export async function settleDeadLetters(batch: MessageBatch<unknown>, scope: Scope): Promise<void> {
  const { deps } = scope;
  for (const msg of batch.messages) {
    const parsed = deliveryMessageSchema.safeParse(msg.body);
    const message = parsed.success ? parsed.data : null;
    if (message === null) {
      log("error", "unreadable dead-lettered webhook message dropped", { message_id: msg.id });
      msg.ack();
      continue;
    }
    await settleAndAck(logDbOf(scope, message.projectId, message.id), deps.now(), msg, message, {
      reason: "dead_lettered",
      why: "dead-lettered: the queue gave up on it",
      notSettled: "dead-lettered webhook not settled",
    });
  }
}

/**
 * Settles the delivery of a message no lane took `failed` with `reason` (unless it was settled
 * meanwhile: its record is the authority), with one `webhook delivery failed` line saying `why`, and
 * acks the message. D1 down: a `notSettled` line and the message again in 30 s; past the queue's own
 * retries the sweeper settles the row.
 */
export async function settleAndAck(
  db: Scope["db"],
  at: Date,
  msg: Message<unknown>,
  message: DeliveryMessage,
  failure: { reason: string; why: string; notSettled: string },
): Promise<void> {
  try {
    const settled = await failPending(db, message.id, at, failure.reason);
    if (settled) logFailure(message, settled.attempts, failure.why);
    msg.ack();
  } catch (error) {
    log("error", failure.notSettled, { delivery_id: message.id, error });
    msg.retry({ delaySeconds: 30 });
  }
}
