import { domainValidationConsumer } from "./domains/validation-queue";
import type { Scope } from "./platform/scope";
import { QUEUES } from "./platform/triggers";
import { consumeDeliveries } from "./webhooks/consumer";
import { settleDeadLetters } from "./webhooks/dead-letter";
import { consumeAsyncRuns } from "./runs/async/consumer";
import { consumeUsageRecords } from "./usage/queue";

export type QueueHandler = (batch: MessageBatch<unknown>, scope: Scope) => Promise<void>;

/** One consumer per configured queue. */
export const queueHandlers: Record<string, QueueHandler> = {
  [QUEUES.webhookDeliveries]: consumeDeliveries,
  [QUEUES.webhookDeadLetters]: settleDeadLetters,
  [QUEUES.domainValidations]: domainValidationConsumer,
  [QUEUES.asyncRuns]: consumeAsyncRuns,
  [QUEUES.usageRecords]: consumeUsageRecords,
};
