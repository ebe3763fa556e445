import { createHttpRouter } from "./http";
import type { Deps } from "./platform/deps";
import { logInvocation } from "./platform/log";
import { serveRequest } from "./platform/request";
import { createScope } from "./platform/scope";
import { queueHandlers } from "./queue";
import { gateHost } from "./routing/host";
import { checkedTarget, pathTarget, RUN_BASE, RUN_ROUTE } from "./runs/path";
import { run } from "./runs/run";
import { cronHandlers } from "./scheduled";
import { sendHeldNow } from "./usage/buffer";
import { usageOutcomes } from "./usage/record";

/** The run route as a request's log line names routes (`/v4/:project_id/:app_name/:path`). */
const LOGGED_RUN_ROUTE = `${RUN_BASE}${RUN_ROUTE}`.replace(/\{([a-z_]+)\}/g, ":$1");

/**
 * The composition root: the Worker's three entry points, built together from one set of `deps`, for
 * production (`index.ts`) and for every test alike. Each invocation gets its scope from `createScope`.
 */
export function createWorker(deps: Deps) {
  const router = createHttpRouter(deps);
  /** The configured cron's handler, or every cron for `wrangler dev`'s bare /__scheduled. */
  async function runCrons(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> {
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
  }

  return {
    /**
     * Every request: its URL parsed once, the way in (`serveRequest`), the host gate, then a run goes
     * straight to `run` and everything else to the router. Runs skip the router: they are what the
     * service exists for, and Hono's context, middleware and validators were a third of the gateway's
     * own cost per run.
     */
    fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
      // The one parse. The WHATWG form is what the host gate checks, the run routes on and the app
      // receives; a request whose URL is not already in it is served as the URL it means.
      const url = new URL(request.url);
      const normal = url.href === request.url ? request : new Request(url.href, request);
      const target = pathTarget(url.pathname);
      const isRun = target !== null && !target.reserved;
      return serveRequest(normal, url.pathname, env, ctx, deps, async (scope, line) => {
        if (isRun) line.route = LOGGED_RUN_ROUTE;
        const answered = await gateHost(scope, url, target);
        if (answered) return answered;
        return isRun ? run(scope, normal, checkedTarget(target), usageOutcomes) : router.fetch(normal, env, ctx);
      });
    },

    async queue(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
      const handler = queueHandlers[batch.queue];
      if (!handler) throw new Error(`No consumer for queue '${batch.queue}'; wrangler.toml and QUEUES disagree.`);
      const scope = createScope(env, ctx, deps);
      try {
        await logInvocation({ request_id: scope.requestId, queue: batch.queue, messages: batch.messages.length }, () =>
          handler(batch, scope),
        );
      } finally {
        // Runs recorded here (async runs) leave with the invocation instead of holding it open.
        sendHeldNow(env, ctx);
      }
    },

    async scheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> {
      try {
        await runCrons(controller, env, ctx);
      } finally {
        // Async runs a sweep ends are on record: they leave with the invocation.
        sendHeldNow(env, ctx);
      }
    },
  } satisfies ExportedHandler<Env>;
}

export type Worker = ReturnType<typeof createWorker>;
