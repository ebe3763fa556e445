import type { Scope } from "../platform/scope";
import { enqueuePending, recordPending, settleUnsent } from "../webhooks/enqueue";
import type { Webhook } from "./admit";
import type { RunAnswer } from "./answer";
import { cutShortAfterHangUp } from "./hang-up";

/**
 * The webhook of a run: a copy of the answer goes to the receiver (`webhooks/`). (An async run keeps
 * its copy in the run store instead: `async/consumer.ts`.)
 */
export interface RunWebhook {
  /** Ends the app's call once the caller has been gone longer than the platform lets the run go on. */
  signal: AbortSignal;
  /**
   * Carries the run to its end in `waitUntil`, so a caller who hangs up still gets the delivery; `copy`
   * resolves once the app's answer is whole (for a stream, when it ended).
   */
  carry(copy: Promise<RunAnswer>): void;
}

/**
 * Puts the delivery on record (`pending`) before the app is called, whatever happens to the run
 * afterwards. A run that did not finish (cut short after a hang-up, or broken by an error) settles
 * its record `failed` (`run_interrupted`), never absent; otherwise the copy is enqueued, after the
 * caller has its answer (spec 6: the delivery does not block the response).
 */
export async function startWebhook(
  scope: Scope,
  request: Request,
  webhook: Webhook,
  target: { projectId: string; appName: string },
  runId: string,
): Promise<RunWebhook> {
  const { projectId, appName } = target;
  const pending = await recordPending(scope, {
    projectId,
    appName,
    runId,
    endpoint: webhook.endpoint,
    secret: webhook.secret,
  });
  const cutShort = cutShortAfterHangUp(request, scope.deps);
  return {
    signal: cutShort.signal,
    carry(copy) {
      const work = copy
        .then(
          async (answer) => {
            if (cutShort.signal.aborted) await settleUnsent(scope, pending, "run_interrupted");
            else await enqueuePending(scope, pending, answer.text);
          },
          () => settleUnsent(scope, pending, "run_interrupted"),
        )
        .finally(() => cutShort.dispose());
      scope.ctx.waitUntil(
        work.then(
          () => undefined,
          () => undefined,
        ),
      );
    },
  };
}
