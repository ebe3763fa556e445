import { domainValidationCron } from "./domains/cron";
import type { Scope } from "./platform/scope";
import { CRONS } from "./platform/triggers";
import { receiverHousekeeping, webhookHousekeeping } from "./webhooks/housekeeping";
import { retentionCron } from "./retention";
import { sweepAsyncRuns } from "./runs/async/sweep";
import { usageOutcomes } from "./usage/record";

export type CronHandler = (controller: ScheduledController, scope: Scope) => Promise<void>;

/** One handler per configured cron. */
export const cronHandlers: Record<string, CronHandler> = {
  // Also the webhook sweeper and retention purge (src/webhooks/housekeeping.ts). Each job runs even if
  // the other throws; the first error is rethrown so the invocation still shows as failed.
  [CRONS.domainValidation]: async (controller, scope) => {
    const failures: unknown[] = [];
    await domainValidationCron(scope, controller.scheduledTime).catch((error: unknown) => failures.push(error));
    await webhookHousekeeping(scope).catch((error: unknown) => failures.push(error));
    await receiverHousekeeping(scope).catch((error: unknown) => failures.push(error));
    if (failures.length > 0) throw failures[0];
  },
  [CRONS.asyncRuns]: async (_controller, scope) => {
    await sweepAsyncRuns(scope, usageOutcomes);
  },
  [CRONS.retention]: async (_controller, scope) => {
    await retentionCron(scope);
  },
};
