import { ApiError } from "../platform/errors";
import { newId } from "../platform/ids";
import type { Scope } from "../platform/scope";
import { admit } from "./admit";
import { type AnswerContext, answerCall, failed } from "./answer";
import { acceptAsync } from "./async/accept";
import { type AppCall, appRequestOf, callApp } from "./call";
import { startWebhook } from "./webhook";
import { webSocketRun } from "./handshake";
import type { RunTarget } from "./path";
import { openRecording } from "../usage/recording";

/**
 * A run of `{project_id}/{app_name}/{path}`, top to bottom: admit it (key, limits, target, body), call
 * the app, answer (the envelope, or the app's own answer passed through as it streams), and hand a copy
 * on (to the webhook; an async run is accepted here and runs in the queue consumer, which stores it).
 * The kinds of run that differ (async, WebSocket, webhook) branch once, each into its own stage.
 * A synchronous run leaves one usage record (src/usage), taken when the caller's answer has ended; an
 * async run's is taken by its consumer when it finishes.
 */
export async function run(scope: Scope, request: Request, target: RunTarget): Promise<Response> {
  const recording = openRecording(scope, request, target);
  try {
    return await runRecorded(scope, request, target, recording);
  } catch (error) {
    recording.refused(error);
    throw error;
  }
}

async function runRecorded(scope: Scope, request: Request, target: RunTarget, recording: ReturnType<typeof openRecording>): Promise<Response> {
  const { deps, config } = scope;
  const admitted = await admit(scope, request, target, (caller) => recording.identified(caller.id));
  // An accepted async run is on record when it finishes (its consumer); a refusal here is a refused run.
  if (admitted.isAsync) return recording.accepted(await acceptAsync(scope, request, admitted));

  const runId = newId("run", deps.now().getTime());
  if (admitted.webSocket) return recording.upgraded(runId, await webSocketRun(scope, request, admitted, runId));

  const appRequest = appRequestOf(request, admitted, runId);
  const limits = { headersMs: config.runTimeoutMs, idleMs: config.runStreamIdleMs };
  const ctx: AnswerContext = { runId, runtime: admitted.runtime, accept: appRequest.headers.get("accept"), requestId: scope.requestId, now: deps.now };
  // With a webhook the delivery is on record before the app is called, and a caller who hangs up
  // leaves the run its grace; without one, the caller's hang-up (`request.signal`) ends the app's call at once.
  const webhook = admitted.webhook ? await startWebhook(scope, request, admitted.webhook, admitted, runId) : null;
  let call: AppCall | null = null;
  const answering = (async () => {
    try {
      call = await callApp(deps, appRequest, limits, webhook?.signal ?? request.signal);
      return await answerCall(call, ctx, webhook !== null);
    } catch (error) {
      // The app gave no answer: the problem is the run's answer, and the webhook's copy.
      if (error instanceof ApiError) return failed(error, ctx);
      throw error;
    }
  })();
  if (webhook) webhook.carry(answering.then((answered) => answered.copy!), () => admitted.caller.afterRun());
  const answered = await answering;
  if (!webhook) admitted.caller.afterRun();
  const { body } = admitted;
  const bytesIn = () => (body.kind === "bytes" ? body.bytes.byteLength : body.kind === "stream" ? body.limit.size() : 0);
  recording.answered(runId, answered, call, bytesIn, webhook !== null);
  return answered.response;
}
