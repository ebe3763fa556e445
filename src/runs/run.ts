import { ApiError } from "../platform/errors";
import type { Scope } from "../platform/scope";
import { admitApp, admitRequest, type AdmittedRun, appRequestOf, identify, refusalOf, startOf } from "./admit";
import { type Answered, callAndAnswer } from "./answer";
import { acceptAsync } from "./async/accept";
import type { RunContext } from "./context";
import { webSocketRun } from "./handshake";
import { type OutcomePort, problemOutcome, type RunOutcome, type RunStart, runClock } from "./outcome";
import type { RunTarget } from "./path";
import { startWebhook } from "./webhook";
import type { AppRequest, BodyEnd } from "./call";

/**
 * A run of `{project_id}/{app_name}/{path}`, top to bottom, one stage a file, each returning a named
 * state: `identify` → `RunCaller`, `admitApp` → the app's deployment, `admitRequest` → `AdmittedRun`,
 * `callAndAnswer` → `Answered` (`callApp` → `AppCall`, then the envelope or the app's own answer passed
 * through as it streams), and the copy handed on to the webhook (`startWebhook` → `RunWebhook`). The
 * kinds of run that differ branch once, each into its own stage: an async run is accepted here and run
 * by its queue consumer (`async/consumer.ts`, the owner of its app call); a WebSocket is passed through
 * (`handshake.ts`).
 *
 * The run ends with one `RunOutcome`, handed to `outcomes` once: here when the caller's answer has
 * ended (or the run was refused once its app was known), by the consumer for an accepted async run. A
 * request refused before its app was known (the project's budget spent, no such app) is a refusal,
 * counted; one refused before its caller was (401, 403) is neither.
 */
export async function run(scope: Scope, request: Request, target: RunTarget, outcomes: OutcomePort): Promise<Response> {
  const caller = await identify(scope, request, target);
  // Accepted: the caller is known. The run's moments count from here.
  const clock = runClock(scope.deps.now);
  const start = startOf(scope, request, target, caller, clock());
  let admitted: AdmittedRun | null = null;
  let appKnown = false;
  try {
    const upstream = await admitApp(scope, target);
    appKnown = true;
    admitted = await admitRequest(scope, request, target, start, caller, upstream);
    // The key was used: its `last_used_at` (at most one write a minute, in `waitUntil`, beside the call).
    caller.afterRun();
    // An accepted async run's outcome is its consumer's; a replayed one's is the run it replays.
    if (admitted.isAsync) return await acceptAsync(scope, request, admitted);
    if (admitted.webSocket) {
      const response = await webSocketRun(scope, request, admitted);
      const endedAt = clock();
      outcomes.ended(scope, {
        ...answeredOutcome(start, response.status, { calledAt: start.acceptedAt, answeredAt: endedAt, endedAt }),
        bytesIn: 0,
        bytesOut: 0,
        webhook: false,
      });
      return response;
    }
    const appRequest = appRequestOf(request, admitted);
    const context = contextOf(scope, admitted, appRequest);

    // With a webhook the delivery is on record before the app is called, and a caller who hangs up
    // leaves the run its grace; without one, the caller's hang-up (`request.signal`) ends the app's call at once.
    const webhook = admitted.webhook
      ? await startWebhook(scope, request, admitted.webhook, admitted, start.runId)
      : null;
    const answering = callAndAnswer(
      scope.deps,
      appRequest,
      context,
      webhook !== null,
      webhook?.signal ?? request.signal,
    );
    // Handed on in `waitUntil` from the start, so the webhook gets its copy even if the caller goes.
    webhook?.carry(answering.then((answered) => answered.copy!));
    const answered = await answering;
    endOnceAnswered(scope, outcomes, request, start, admitted, answered, clock);
    return answered.response;
  } catch (error) {
    const reason = appKnown ? null : refusalOf(error);
    if (reason !== null) {
      outcomes.refused(scope, { projectId: target.projectId, reason, at: clock() });
    } else {
      const problem = error instanceof ApiError ? error : new ApiError("internal_error", "The run failed.");
      outcomes.ended(
        scope,
        problemOutcome(
          { ...start, mode: admitted?.isAsync ? "async" : start.mode },
          problem,
          { endedAt: clock(), hungUp: hungUp(request) },
          { bytesIn: admitted ? bytesIn(admitted) : 0, bytesOut: 0, webhook: (admitted?.webhook ?? null) !== null },
        ),
      );
    }
    throw error;
  }
}

/** The run's context, made once it is admitted and has its id. */
function contextOf(scope: Scope, admitted: AdmittedRun, appRequest: AppRequest): RunContext {
  const { deps, config } = scope;
  return {
    runId: admitted.runId,
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

const hungUp = (request: Request) => (request.signal as AbortSignal | undefined)?.aborted === true;

/** The parts of an outcome whose answer was the app's (`status`), before its bytes are counted. */
function answeredOutcome(
  start: RunStart,
  status: number,
  at: { calledAt: number; answeredAt: number; endedAt: number; firstByteAt?: number | null },
): Omit<RunOutcome, "bytesIn" | "bytesOut" | "webhook"> {
  const { acceptedAt, ...facts } = start;
  return {
    ...facts,
    status,
    ending: "answered",
    failure: status >= 400 ? { by: "app", status } : null,
    times: {
      acceptedAt,
      calledAt: at.calledAt,
      answeredAt: at.answeredAt,
      firstByteAt: at.firstByteAt ?? null,
      handedOverAt: null,
      endedAt: at.endedAt,
    },
  };
}

/** How a passed-through answer's body ended, as the run's ending and failure. */
const BODY_ENDS: Record<BodyEnd, { ending: RunOutcome["ending"]; code: string | null }> = {
  done: { ending: "answered", code: null },
  cancelled: { ending: "hung_up", code: null },
  idle: { ending: "timeout", code: "gateway_timeout" },
  broken: { ending: "unreachable", code: "bad_gateway" },
};

/**
 * Hands the run's outcome on once its answer has ended: at once for a whole answer (the envelope, a
 * problem), when the body ended for a passed-through one (read to its end, broken off, or the caller
 * gone). Not held in `waitUntil`: the end of the caller's stream comes while the invocation is alive
 * for it, and an unread body would hold the invocation until the idle limit.
 */
function endOnceAnswered(
  scope: Scope,
  outcomes: OutcomePort,
  request: Request,
  start: RunStart,
  admitted: AdmittedRun,
  answered: Answered,
  clock: (wall?: number) => number,
): void {
  const webhook = admitted.webhook !== null;
  const { call, response } = answered;
  if (call === null) {
    // The app gave no answer: the gateway's problem is the caller's.
    outcomes.ended(
      scope,
      problemOutcome(
        start,
        answered.problem!,
        {
          calledAt: answered.calledAt === null ? null : clock(answered.calledAt),
          endedAt: clock(),
          hungUp: hungUp(request),
        },
        { bytesIn: bytesIn(admitted), bytesOut: answered.size ?? 0, webhook },
      ),
    );
    return;
  }
  const at = { calledAt: clock(call.startedAt), answeredAt: clock(call.answeredAt) };
  if (answered.size !== null) {
    const outcome = answeredOutcome(start, response.status, { ...at, endedAt: clock() });
    if (hungUp(request)) outcome.ending = "hung_up";
    outcomes.ended(scope, { ...outcome, bytesIn: bytesIn(admitted), bytesOut: answered.size, webhook });
    return;
  }
  const { tally } = call;
  void tally.ended.then((how) => {
    // A cancelled answer is the caller gone: the runtime may cancel the body before it aborts
    // `request.signal` (so under `wrangler dev`), and nothing else of ours cancels it.
    const end = BODY_ENDS[hungUp(request) && how !== "idle" ? "cancelled" : how];
    const outcome = answeredOutcome(start, response.status, {
      ...at,
      endedAt: clock(),
      firstByteAt: tally.firstByteAt === null ? null : clock(tally.firstByteAt),
    });
    outcome.ending = end.ending;
    if (end.code !== null) outcome.failure = { by: "gateway", code: end.code };
    outcomes.ended(scope, { ...outcome, bytesIn: bytesIn(admitted), bytesOut: tally.bytes, webhook });
  });
}
