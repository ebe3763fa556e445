import { newId } from "../platform/ids";
import type { Scope } from "../platform/scope";
import { openRecording } from "../usage/recording";
import { admit, type AdmittedRun, appRequestOf } from "./admit";
import { callAndAnswer } from "./answer";
import type { AppRequest } from "./call";
import { acceptAsync } from "./async/accept";
import type { RunContext } from "./context";
import { webSocketRun } from "./handshake";
import type { RunTarget } from "./path";
import { startWebhook } from "./webhook";
import { deadlineOf, withDeadline } from "./deadline";
import { waitRun } from "./keeper/wait";

/**
 * A run of `{project_id}/{app_name}/{path}`, top to bottom, one stage a file, each returning a named
 * state: `admit` → `AdmittedRun` (key, limits, target, body), `callAndAnswer` → `Answered` (`callApp`
 * → `AppCall`, then the envelope or the app's own answer passed through as it streams), and the copy
 * handed on to the webhook (`startWebhook` → `RunWebhook`). The kinds of run that differ branch once,
 * each into its own stage: an async run is accepted here and run by its queue consumer
 * (`async/consumer.ts`, which stores it); a WebSocket is passed through (`handshake.ts`).
 *
 * Exactly one usage record per run (src/usage): a refusal once the caller is known, an accepted async
 * run by its consumer when it finishes, every other run when the caller's answer has ended.
 */
export async function run(scope: Scope, request: Request, target: RunTarget): Promise<Response> {
  const acceptedAt = Date.now();
  const recording = openRecording(scope, request, target);
  try {
    const admitted = await admit(scope, request, target, {
      identified: (caller) => recording.identified(caller.id),
      appKnown: () => recording.appKnown(),
      read: (bytes) => recording.read(bytes),
    });
    // The key was used: its `last_used_at` (at most one write a minute, in `waitUntil`, beside the call).
    admitted.caller.afterRun();
    if (admitted.isAsync) return recording.accepted(await acceptAsync(scope, request, admitted));

    const runId = newId("run", scope.deps.now().getTime());
    recording.named(runId);
    if (admitted.webSocket) return recording.upgraded(runId, await webSocketRun(scope, request, admitted, runId));
    const appRequest = appRequestOf(request, admitted, runId);
    // A waited run's app call is its keeper's (keeper/wait.ts): it may outlive this invocation.
    if (admitted.wait !== null)
      return await waitRun(scope, request, admitted, appRequest, {
        runId,
        acceptedAt,
        acceptedWall: acceptedAt,
        path: admitted.appPath,
      });
    const run = contextOf(scope, admitted, appRequest);

    // With a webhook the delivery is on record before the app is called, and a caller who hangs up
    // leaves the run its grace; without one, the caller's hang-up (`request.signal`) ends the app's call at once.
    const webhook = admitted.webhook ? await startWebhook(scope, request, admitted.webhook, admitted, run.runId) : null;
    const deadline =
      admitted.cancelAfterMs === null
        ? null
        : deadlineOf(run.runId, admitted.cancelAfterMs, Date.now() - acceptedAt, scope.deps.sleep);
    const cancel = withDeadline(webhook?.signal ?? request.signal, deadline);
    const answering = callAndAnswer(scope.deps, appRequest, run, webhook !== null, cancel);
    // Handed on in `waitUntil` from the start, so the webhook gets its copy even if the caller goes.
    webhook?.carry(answering.then((answered) => answered.copy!));
    const answered = await answering;
    if (deadline) {
      // A whole answer (envelope, problem) has ended its call already; a passed-through one ends with its body.
      if (answered.size === null && answered.call) void answered.call.tally.ended.finally(deadline.dispose);
      else deadline.dispose();
    }
    recording.answered(run.runId, answered, answered.call, () => bytesIn(admitted), webhook !== null);
    return answered.response;
  } catch (error) {
    recording.refused(error);
    throw error;
  }
}

/** The run's context, made once it is admitted and has its id. */
function contextOf(scope: Scope, admitted: AdmittedRun, appRequest: AppRequest): RunContext {
  const { deps, config } = scope;
  return {
    runId: appRequest.runId,
    runtime: admitted.runtime,
    accept: appRequest.headers.get("accept"),
    requestId: scope.requestId,
    now: deps.now,
    limits: { headersMs: config.runTimeoutMs, idleMs: config.runStreamIdleMs },
  };
}

/** The caller's body as it reached the app: read whole, or counted as it flowed. */
function bytesIn({ body }: AdmittedRun): number {
  if (body.kind === "bytes") return body.bytes.byteLength;
  return body.kind === "stream" ? body.limit.size() : 0;
}
