import { ApiError } from "../platform/errors";
import { annotateInvocation } from "../platform/log";
import type { Scope } from "../platform/scope";
import { admitApp, admitRequest, type Admission, identify, refusalOf, startOf } from "./admit";
import { isMode, outcomeMode } from "./admitted";
import { queueAsyncRun } from "./async/accept";
import { bytesIn, openEnd } from "./end";
import { type OutcomePort, runClock } from "./outcome";
import { runEvents } from "./run-events";
import type { RunTarget } from "./path";
import { waitRun } from "./wait/wait";
import { socketRun, syncRun } from "./sync/sync";

/**
 * A run of `{project_id}/{app_name}/{path}`, top to bottom: `identify` → `RunCaller`, `admitApp` → the
 * app's deployment, `admitRequest` → the `AdmittedRun` (admitted.ts: the one value of the run, its mode
 * among it) and the app's request; then the run goes to the owner of its mode, once, each in its folder
 * with an owner file that reads admitted → call → answer → outcome: `sync/sync.ts` (the Worker: a
 * synchronous run, a WebSocket), `wait/` (the run's keeper: `wait.ts` hands it over, `kept-call.ts`
 * calls), `async/` (accepted here, `accept.ts`; called by its queue consumer, `consumer.ts`).
 *
 * The run ends with one `RunOutcome`, folded from its events (`run-events.ts`) and handed to `outcomes`
 * once (`end.ts`): here when the caller's answer has ended, the caller hung up, or the run was refused
 * once its app was known; by its owner otherwise (the consumer, the keeper). A request refused before
 * its app was known (the project's budget spent, no such app) is a refusal, counted; one refused before
 * its caller was (401, 403) is neither.
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
      end.endsElsewhere();
      if (response.headers.get("idempotent-replayed") !== "true") outcomes.started(scope, { ...start, mode: "async" });
      return response;
    }
    const owner = { clock, sinceAcceptance: () => Date.now() - acceptedWall };
    if (isMode(admitted, "websocket")) return await socketRun(scope, { ...admission, run: admitted }, end, owner);
    if (isMode(admitted, "wait")) {
      // A waited run's app call, and so its outcome, is its keeper's: it may outlive this invocation.
      // Unless the keeper does not take it (it holds as many runs as it may): then it ends here.
      end.endsElsewhere();
      return await waitRun(scope, request, admitted, appRequest, owner.sinceAcceptance(), (refused) => {
        const events = runEvents(start, (outcome) => outcomes.ended(scope, outcome));
        events.record({ kind: "failed", problem: refused });
        events.ended({ at: clock(), bytesIn: admitted.bytesIn, bytesOut: 0, webhook: admitted.webhook !== null });
      });
    }
    if (isMode(admitted, "sync")) return await syncRun(scope, request, { ...admission, run: admitted }, end, owner);
    throw new Error("A run of no known mode.");
  } catch (error) {
    const reason = appKnown ? null : refusalOf(error);
    // Refused before the app was known (its budget, no such app): counted, never a run.
    if (reason !== null) {
      end.endsElsewhere();
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
