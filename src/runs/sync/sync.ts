import type { Scope } from "../../platform/scope";
import type { Admission } from "../admit";
import type { AdmittedRunIn } from "../admitted";
import { callAndAnswer } from "../answer";
import { contextOf } from "../context";
import { deadlineOf, withDeadline } from "../deadline";
import { endWhenAnswered, type RunEnd } from "../end";
import { startWebhook } from "../webhook";
import { webSocketRun } from "./handshake";

/**
 * A synchronous run, its owner the Worker invocation serving its caller: admitted → (its webhook on
 * record) → the app's call → the answer, passed through or in the envelope → its end, once the answer
 * has ended (`end.ts`). A WebSocket is a synchronous run's pass-through (`socketRun`).
 */

/** The clocks a run's owner goes on from: the run's (`clock`) and the wall time since its acceptance. */
export interface OwnerClock {
  clock: (wall?: number) => number;
  sinceAcceptance: () => number;
}

export async function syncRun(
  scope: Scope,
  request: Request,
  admission: Admission & { run: AdmittedRunIn<"sync"> },
  end: RunEnd,
  { clock, sinceAcceptance }: OwnerClock,
): Promise<Response> {
  const { run, appRequest } = admission;
  const context = contextOf(run, scope.deps.now);
  // With a webhook the delivery is on record before the app is called, and a caller who hangs up
  // leaves the run its grace; without one, the caller's hang-up (`request.signal`) ends the app's call at once.
  const webhook = run.webhook ? await startWebhook(scope, request, run) : null;
  const deadline =
    run.cancelAfterMs === null ? null : deadlineOf(run.runId, run.cancelAfterMs, sinceAcceptance(), scope.deps.sleep);
  end.calling();
  const answering = callAndAnswer(
    scope.deps,
    appRequest,
    context,
    webhook !== null,
    withDeadline(webhook?.signal ?? request.signal, deadline),
  );
  // Given to the webhook in `waitUntil` from the start, so it gets its copy even if the caller goes.
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
}

/** A WebSocket run: the caller's upgrade passed through to the app; the run ends at the app's handshake answer. */
export async function socketRun(
  scope: Scope,
  admission: Admission & { run: AdmittedRunIn<"websocket"> },
  end: RunEnd,
  { clock }: OwnerClock,
): Promise<Response> {
  const response = await webSocketRun(scope, admission.appRequest);
  end.record({ kind: "called", at: admission.run.acceptedAt });
  end.record({ kind: "answered", at: clock(), status: response.status });
  end.ended(0);
  return response;
}
