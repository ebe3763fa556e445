import { domainValidationCron } from "./domains/cron";
import type { Scope } from "./platform/scope";
import { CRONS } from "./platform/triggers";

export type CronHandler = (controller: ScheduledController, scope: Scope) => Promise<void>;

/** One handler per configured cron. */
export const cronHandlers: Record<string, CronHandler> = {
  [CRONS.domainValidation]: async (controller, scope) => {
    await domainValidationCron(scope, controller.scheduledTime);
  },
};
