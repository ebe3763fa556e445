import { domainValidationConsumer } from "./domains/validation-queue";
import type { Scope } from "./platform/scope";
import { QUEUES } from "./platform/triggers";
import { consumeDeliveries } from "./webhooks/consumer";
import { settleDeadLetters } from "./webhooks/dead-letter";
import { consumeAbandonedAsyncRuns, consumeAsyncRuns } from "./runs/async/consumer";
import { consumeUsageRecords } from "./usage/queue";
import { usageOutcomes } from "./usage/record";

export type QueueHandler = (batch: MessageBatch<unknown>, scope: Scope) => Promise<void>;

/** One consumer per configured queue. */
export const queueHandlers: Record<string, QueueHandler> = {
  [QUEUES.webhookDeliveries]: consumeDeliveries,
  [QUEUES.webhookDeadLetters]: settleDeadLetters,
  [QUEUES.domainValidations]: domainValidationConsumer,
  // Each run's outcome goes to usage (src/runs/outcome.ts, OutcomePort).
  [QUEUES.asyncRuns]: (batch, scope) => consumeAsyncRuns(batch, scope, usageOutcomes),
  [QUEUES.asyncRunDeadLetters]: (batch, scope) => consumeAbandonedAsyncRuns(batch, scope, usageOutcomes),
  [QUEUES.usageRecords]: consumeUsageRecords,
};
