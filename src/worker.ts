import { createHttpRouter } from "./http";
import type { Deps } from "./platform/deps";
import { logInvocation } from "./platform/log";
import { createScope } from "./platform/scope";
import { cronHandlers } from "./scheduled";
import { queueHandlers } from "./queue";
import { serveRun } from "./run-entry";
import { matchRun } from "./runs/path";

/**
 * The composition root: the Worker's three entry points, built together from one set of `deps`, for
 * production (`index.ts`) and for every test alike. Each invocation gets its scope from `createScope`.
 */
export function createWorker(deps: Deps) {
  const router = createHttpRouter(deps);
  return {
    /** Runs take the run entry; everything else, the router. */
    fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
      const target = matchRun(request);
      return target ? serveRun(request, env, ctx, deps, target) : Promise.resolve(router.fetch(request, env, ctx));
    },

    async queue(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
      const handler = queueHandlers[batch.queue];
      if (!handler) throw new Error(`No consumer for queue '${batch.queue}'; wrangler.toml and QUEUES disagree.`);
      const scope = createScope(env, ctx, deps);
      await logInvocation({ request_id: scope.requestId, queue: batch.queue, messages: batch.messages.length }, () => handler(batch, scope));
    },

    async scheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> {
      // `wrangler dev`'s /__scheduled without ?cron= fires an empty expression: run every configured cron.
      if (controller.cron === "") {
        for (const [cron, handler] of Object.entries(cronHandlers)) {
          const scope = createScope(env, ctx, deps);
          await logInvocation({ request_id: scope.requestId, cron }, () => handler(controller, scope));
        }
        return;
      }
      const handler = cronHandlers[controller.cron];
      if (!handler) throw new Error(`No handler for cron '${controller.cron}'; wrangler.toml and CRONS disagree.`);
      const scope = createScope(env, ctx, deps);
      await logInvocation({ request_id: scope.requestId, cron: controller.cron }, () => handler(controller, scope));
    },
  } satisfies ExportedHandler<Env>;
}

export type Worker = ReturnType<typeof createWorker>;
