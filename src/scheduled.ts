import { domainValidationCron } from "./domains/cron";
import { type Deps, defaultDeps } from "./platform/context";
import type { Env } from "./platform/env";
import { CRONS } from "./platform/triggers";
import { webhookHousekeeping } from "./webhooks/housekeeping";

export type CronHandler = (controller: ScheduledController, env: Env, ctx: ExecutionContext, deps: Deps) => Promise<void>;

/** One handler per configured cron. */
export const cronHandlers: Record<string, CronHandler> = {
  // Also the webhook sweeper and retention purge (src/webhooks/housekeeping.ts): the one cron there is.
  [CRONS.domainValidation]: async (_controller, env, _ctx, deps) => {
    await domainValidationCron(env, deps);
    await webhookHousekeeping(env, deps);
  },
};

/** The Worker's `scheduled` entry point, built with the same `deps` as `fetch`. */
export function createScheduled(deps: Deps = defaultDeps) {
  return async (controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> => {
    const handler = cronHandlers[controller.cron];
    if (!handler) throw new Error(`No handler for cron '${controller.cron}'; wrangler.toml and CRONS disagree.`);
    await handler(controller, env, ctx, deps);
  };
}
