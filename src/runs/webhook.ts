import type { Scope } from "../platform/scope";
import { type DeliveryBody, deliverRunCopy } from "../webhooks/enqueue";
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
 * The run's delivery, handed to `webhooks/` in one call (`deliverRunCopy`), on record (`pending`)
 * before the app is called, whatever happens to the run afterwards. Its body is the copy of the answer
 * once `carry` has it, or `run_interrupted` for a run that did not finish (cut short after a hang-up,
 * or broken by an error).
 */
export async function startWebhook(
  scope: Scope,
  request: Request,
  webhook: Webhook,
  target: { projectId: string; appName: string },
  runId: string,
): Promise<RunWebhook> {
  const { projectId, appName } = target;
  let bodyOf: (body: DeliveryBody) => void = () => undefined;
  const body = new Promise<DeliveryBody>((resolve) => (bodyOf = resolve));
  await deliverRunCopy(scope, { projectId, appName, runId, endpoint: webhook.endpoint, secret: webhook.secret }, body);
  const cutShort = cutShortAfterHangUp(request, scope.deps);
  return {
    signal: cutShort.signal,
    carry(copy) {
      void copy
        .then(
          (answer) => bodyOf(cutShort.signal.aborted ? { unsent: "run_interrupted" } : { text: answer.text }),
          () => bodyOf({ unsent: "run_interrupted" }),
        )
        .finally(() => cutShort.dispose());
    },
  };
}
