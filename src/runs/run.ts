import { ApiError } from "../platform/errors";
import { annotateInvocation } from "../platform/log";
import type { Scope } from "../platform/scope";
import { admitApp, admitRequest, type Admission, identify, refusalOf, startOf } from "./admit";
import { isMode, outcomeMode } from "./admitted";
import { callAndAnswer } from "./answer";
import { queueAsyncRun } from "./async/accept";
import { contextOf } from "./context";
import { webSocketRun } from "./handshake";
import { bytesIn, endWhenAnswered, openEnd } from "./end";
import { type OutcomePort, runClock } from "./outcome";
import { runEvents } from "./run-events";
import type { RunTarget } from "./path";
import { startWebhook } from "./webhook";
import { deadlineOf, withDeadline } from "./deadline";
import { waitRun } from "./keeper/wait";

/**
 * A run of `{project_id}/{app_name}/{path}`, top to bottom, one stage a file, each returning a named
 * state: `identify` → `RunCaller`, `admitApp` → the app's deployment, `admitRequest` → the `AdmittedRun`
 * (admitted.ts: the one value of the run, its mode among it) and the app's request,
 * `callAndAnswer` → `Answered` (`callApp` → `AppCall`, then the envelope or the app's own answer passed
 * through as it streams), and the copy handed on to the webhook (`startWebhook` → `RunWebhook`). The
 * kinds of run that differ branch once, each into its own stage: an async run is accepted here and run
 * by its queue consumer (`async/consumer.ts`, the owner of its app call); a waited run's app call is
 * its keeper's (`keeper/wait.ts`); a WebSocket is passed through (`handshake.ts`).
 *
 * The run ends with one `RunOutcome`, folded from its events (`run-events.ts`) and handed to `outcomes`
 * once (`end.ts`): here when the caller's answer has ended, the caller hung up, or the run was refused
 * once its app was known; by its owner otherwise (the consumer, the keeper). A request refused before its app was known (the project's
 * budget spent, no such app) is a refusal, counted; one refused before its caller was (401, 403) is
 * neither.
 */
export async function run(scope: Scope, request: Request, target: RunTarget, outcomes: OutcomePort): Promise<Response> {
  const caller = await identify(scope, request, target);
  // Accepted: the caller is known. The run's moments count from here, and its end is held from here.
  const acceptedAt = scope.deps.now().getTime();
  const acceptedWall = Date.now();
  const clock = runClock(acceptedAt);
  const start = startOf(scope, request, target, caller, acceptedAt);
  // Every line the run writes from here carries its id (an OTLP export's log records too).
  annotateInvocation({ run_id: start.runId });
  let admission: Admission | null = null;
  // The caller's body read whole, counted as it crossed: what a run refused for its body read of it.
  let bodyRead = 0;
  const bytesSoFar = () => (admission ? bytesIn(admission) : bodyRead);
  const end = openEnd(
    scope,
    outcomes,
    request,
    start,
    clock,
    bytesSoFar,
    () => (admission?.run.webhook ?? null) !== null,
  );
  let appKnown = false;
  try {
    const deployment = await admitApp(scope, target);
    appKnown = true;
    annotateInvocation({ app_name: target.appName });
    admission = await admitRequest(scope, request, target, start, deployment, (bytes) => (bodyRead += bytes));
    const { run: admitted, appRequest } = admission;
    caller.markUsed();
    const mode = outcomeMode(admitted.mode);
    end.record({ kind: "admitted", mode });
    // Under way from here until its outcome (every mode: the list of runs under way needs no D1 write);
    // an async run once it is queued, unless the request replayed another run (that one is under way);
    // a waited run once its keeper takes it (a retry under its key joins the key's run: no run of its own).
    if (mode === "sync") outcomes.started(scope, { ...start, mode });
    if (isMode(admitted, "async")) {
      // An accepted async run's outcome is its consumer's; a replayed one's is the run it replays.
      const response = await queueAsyncRun(scope, request, admission);
      end.handedOff();
      if (response.headers.get("idempotent-replayed") !== "true") outcomes.started(scope, { ...start, mode: "async" });
      return response;
    }
    if (isMode(admitted, "websocket")) {
      const response = await webSocketRun(scope, appRequest);
      end.record({ kind: "called", at: start.acceptedAt });
      end.record({ kind: "answered", at: clock(), status: response.status });
      end.ended(0);
      return response;
    }
    if (isMode(admitted, "wait")) {
      // A waited run's app call, and so its outcome, is its keeper's: it may outlive this invocation.
      // Unless the keeper does not take it (it holds as many runs as it may): then it ends here.
      end.handedOff();
      return await waitRun(scope, request, admitted, appRequest, Date.now() - acceptedWall, (refused) => {
        const events = runEvents(start, (outcome) => outcomes.ended(scope, outcome));
        events.record({ kind: "failed", problem: refused });
        events.ended({ at: clock(), bytesIn: admitted.bytesIn, bytesOut: 0, webhook: admitted.webhook !== null });
      });
    }
    const context = contextOf(admitted, scope.deps.now);

    // With a webhook the delivery is on record before the app is called, and a caller who hangs up
    // leaves the run its grace; without one, the caller's hang-up (`request.signal`) ends the app's call at once.
    const webhook = admitted.webhook ? await startWebhook(scope, request, admitted) : null;
    const deadline =
      admitted.cancelAfterMs === null
        ? null
        : deadlineOf(start.runId, admitted.cancelAfterMs, Date.now() - acceptedWall, scope.deps.sleep);
    end.calling();
    const answering = callAndAnswer(
      scope.deps,
      appRequest,
      context,
      webhook !== null,
      withDeadline(webhook?.signal ?? request.signal, deadline),
    );
    // Handed on in `waitUntil` from the start, so the webhook gets its copy even if the caller goes.
    webhook?.carry(answering.then((answered) => answered.copy!));
    // Ended from the answer itself, not from this function's continuation, which a hang-up cancels.
    void answering.then((answered) => {
      if (deadline) {
        // A whole answer (envelope, problem) has ended its call already; a passed-through one ends with its body.
        if (answered.size === null && answered.call) void answered.call.tally.ended.finally(deadline.dispose);
        else deadline.dispose();
      }
      endWhenAnswered(end, answered, clock, deadline?.signal);
    });
    return (await answering).response;
  } catch (error) {
    const reason = appKnown ? null : refusalOf(error);
    // Refused before the app was known (its budget, no such app): counted, never a run.
    if (reason !== null) {
      end.handedOff();
      outcomes.refused(scope, { projectId: target.projectId, reason, at: clock() });
    } else {
      const problem = error instanceof ApiError ? error : new ApiError("internal_error", "The run failed.");
      end.record({ kind: "failed", problem });
      if (end.hungUp()) end.record({ kind: "hung_up" });
      end.ended(0);
    }
    throw error;
  }
}
