import { domainValidationConsumer } from "./domains/cron";
import { type Deps, defaultDeps } from "./platform/context";
import type { Env } from "./platform/env";
import { QUEUES } from "./platform/triggers";
import { deliverWebhooks } from "./webhooks/consumer";
import { settleDeadLetters } from "./webhooks/dead-letter";

export type QueueHandler = (batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext, deps: Deps) => Promise<void>;

/** One consumer per configured queue. */
export const queueHandlers: Record<string, QueueHandler> = {
  [QUEUES.webhookDeliveries]: (batch, env, ctx, deps) => deliverWebhooks(batch, env, ctx, deps),
  [QUEUES.webhookDeadLetters]: settleDeadLetters,
  [QUEUES.domainValidations]: (batch, env, _ctx, deps) => domainValidationConsumer(batch, env, deps),
};

/** The Worker's `queue` entry point, built with the same `deps` as `fetch`. */
export function createQueue(deps: Deps = defaultDeps) {
  return async (batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> => {
    const handler = queueHandlers[batch.queue];
    if (!handler) throw new Error(`No consumer for queue '${batch.queue}'; wrangler.toml and QUEUES disagree.`);
    await handler(batch, env, ctx, deps);
  };
}
