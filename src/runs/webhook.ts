import type { Scope } from "../platform/scope";
import { type DeliveryBody, handRunCopyToLane } from "../webhooks/enqueue";
import { openSecret } from "../webhooks/secret-box";
import { log } from "../platform/log";
import type { AdmittedRun } from "./admitted";
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
 * The run's delivery, handed to `webhooks/` in one call (`handRunCopyToLane`), on record (`pending`)
 * before the app is called, whatever happens to the run afterwards. Its body is the copy of the answer
 * once `carry` has it, or `run_interrupted` for a run that did not finish (cut short after a hang-up,
 * or broken by an error).
 */
export async function startWebhook(
  scope: Scope,
  request: Request,
  run: Pick<AdmittedRun, "runId" | "projectId" | "appName" | "webhook">,
): Promise<RunWebhook> {
  const { projectId, appName, runId } = run;
  const { endpoint } = run.webhook!;
  let bodyOf: (body: DeliveryBody) => void = () => undefined;
  const body = new Promise<DeliveryBody>((resolve) => (bodyOf = resolve));
  const secret = await webhookSecretOf(scope, run);
  await handRunCopyToLane(scope, { projectId, appName, runId, endpoint, secret }, body);
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

/**
 * The run's webhook secret in clear, for its delivery to seal under its own id (webhooks/enqueue.ts):
 * admission sealed it under the run's id; opened with the previous key too during a rotation.
 */
export async function webhookSecretOf(
  { config }: Pick<Scope, "config">,
  run: Pick<AdmittedRun, "runId" | "webhook">,
): Promise<string | undefined> {
  const sealed = run.webhook?.secret ?? null;
  if (sealed === null) return undefined;
  return openSecret(config.webhookEncryptionKey, run.runId, sealed, config.previous.webhookEncryptionKey);
}

/**
 * `webhookSecretOf` for an owner that outlives a key rotation (a keeper, the async consumer): `null`,
 * logged, when neither key opens the secret. The run then goes on without its delivery: an unsigned one
 * would be refused by a receiver that checks.
 */
export async function openableWebhookSecret(
  scope: Pick<Scope, "config">,
  run: Pick<AdmittedRun, "runId" | "projectId" | "webhook">,
): Promise<{ secret: string | undefined } | null> {
  try {
    return { secret: await webhookSecretOf(scope, run) };
  } catch (error) {
    log("error", "run webhook not delivered: secret unreadable", {
      run_id: run.runId,
      project_id: run.projectId,
      error,
    });
    return null;
  }
}
