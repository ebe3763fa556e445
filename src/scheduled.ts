import { domainValidationCron } from "./domains/cron";
import type { Scope } from "./platform/scope";
import { CRONS } from "./platform/triggers";
import { webhookHousekeeping } from "./webhooks/housekeeping";
import { sweepAsyncRuns } from "./runs/async/sweep";

export type CronHandler = (controller: ScheduledController, scope: Scope) => Promise<void>;

/** One handler per configured cron. */
export const cronHandlers: Record<string, CronHandler> = {
  // Also the webhook sweeper and retention purge (src/webhooks/housekeeping.ts): the one cron there is.
  [CRONS.domainValidation]: async (controller, scope) => {
    await domainValidationCron(scope, controller.scheduledTime);
    await webhookHousekeeping(scope);
  },
  [CRONS.asyncRuns]: async (_controller, scope) => {
    await sweepAsyncRuns(scope);
  },
};
