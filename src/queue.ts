import type { Env } from "./platform/env";
import { QUEUES } from "./platform/triggers";

type QueueHandler = (batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext) => Promise<void>;

/** One consumer per configured queue; the webhooks capability fills in delivery. */
export const queueHandlers: Record<string, QueueHandler> = {
  [QUEUES.webhookDeliveries]: async (batch) => {
    // Webhook delivery arrives with the run proxy; until then nothing produces to this queue.
    batch.retryAll();
  },
};

export async function queue(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
  const handler = queueHandlers[batch.queue];
  if (!handler) throw new Error(`No consumer for queue '${batch.queue}'; wrangler.toml and QUEUES disagree.`);
  await handler(batch, env, ctx);
}
