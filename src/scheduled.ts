import { domainValidationCron } from "./domains/cron";
import { type Deps, defaultDeps } from "./platform/context";
import type { Env } from "./platform/env";
import { CRONS } from "./platform/triggers";
import { sweepAsyncRuns } from "./runs/async/sweep";

export type CronHandler = (controller: ScheduledController, env: Env, ctx: ExecutionContext, deps: Deps) => Promise<void>;

/** One handler per configured cron. */
export const cronHandlers: Record<string, CronHandler> = {
  [CRONS.domainValidation]: async (_controller, env, _ctx, deps) => {
    await domainValidationCron(env, deps);
  },
  [CRONS.asyncRuns]: async (_controller, env, _ctx, deps) => {
    await sweepAsyncRuns(env, deps);
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
