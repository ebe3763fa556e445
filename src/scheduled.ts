import { domainValidationCron } from "./domains/cron";
import type { Scope } from "./platform/scope";
import { CRONS } from "./platform/triggers";
import { sweepAsyncRuns } from "./runs/async/sweep";

export type CronHandler = (controller: ScheduledController, scope: Scope) => Promise<void>;

/** One handler per configured cron. */
export const cronHandlers: Record<string, CronHandler> = {
  [CRONS.domainValidation]: async (controller, scope) => {
    await domainValidationCron(scope, controller.scheduledTime);
  },
  [CRONS.asyncRuns]: async (_controller, scope) => {
    await sweepAsyncRuns(scope);
  },
};
