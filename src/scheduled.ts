import type { Env } from "./platform/env";
import { CRONS } from "./platform/triggers";

type CronHandler = (controller: ScheduledController, env: Env, ctx: ExecutionContext) => Promise<void>;

/** One handler per configured cron; the custom domains capability fills in domain validation. */
export const cronHandlers: Record<string, CronHandler> = {
  [CRONS.domainValidation]: async () => {
    // Domain validation arrives with the custom domains capability; nothing is pending before it.
  },
};

export async function scheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> {
  const handler = cronHandlers[controller.cron];
  if (!handler) throw new Error(`No handler for cron '${controller.cron}'; wrangler.toml and CRONS disagree.`);
  await handler(controller, env, ctx);
}
