import { ApiError } from "../../platform/errors";
import type { Scope } from "../../platform/scope";
import type { AdmittedRun } from "../admit";
import { acceptedBody } from "../async/accept";
import { onWire } from "../app-request";
import { type AppRequest, runMeta } from "../call";
import { keeperName } from "./keeper";
import type { KeeperAnswer, KeptRun } from "./message";
import { failureAnswer, responseOf } from "../answer";

/**
 * A waited run (`Prefer: wait=N`), the Worker's side: the run is admitted as any run is, then its app
 * request goes to the run's keeper, which owns the app's call from here (keeper.ts). The caller gets
 * what the keeper answers: the app's answer (exactly a synchronous run's, plus `Preference-Applied`),
 * or, past the wait, 202 with the run resource and `Location`. A caller who hangs up while waiting
 * tells the keeper at once (`callerLeft`, in `waitUntil`): the run is handed over, never ended.
 */

/** The run as the Worker knows it when it hands it over: its id, when it was accepted, on which clock. */
export interface WaitedRun {
  runId: string;
  /** The run's clock at acceptance (epoch ms). */
  acceptedAt: number;
  /** `Date.now()` at acceptance: the wait and the deadline count from it. */
  acceptedWall: number;
  /** The app's path for the outcome. */
  path: string;
}

/** The caller's body's size: a waited run's body was read whole by the admit stage (or there is none). */
const bytesInOf = ({ body }: AdmittedRun): number => (body.kind === "bytes" ? body.bytes.byteLength : 0);

export async function waitRun(
  scope: Scope,
  request: Request,
  admitted: AdmittedRun,
  appRequest: AppRequest,
  waited: WaitedRun,
  notTaken: (error: ApiError) => void,
): Promise<Response> {
  const { runId } = waited;
  const wait = admitted.wait!;
  const kept: KeptRun = {
    v: 1,
    runId,
    projectId: admitted.projectId,
    appName: admitted.appName,
    path: waited.path,
    method: appRequest.method,
    caller: admitted.caller.id,
    requestId: scope.requestId,
    runtime: admitted.runtime,
    acceptHeader: appRequest.headers.get("accept"),
    limits: { headersMs: scope.config.runTimeoutMs, idleMs: scope.config.runStreamIdleMs },
    acceptedAt: waited.acceptedAt,
    sentAfterMs: Date.now() - waited.acceptedWall,
    wait,
    cancelAfterMs: admitted.cancelAfterMs,
    webhook: admitted.webhook,
    bytesIn: bytesInOf(admitted),
  };
  const keeper = scope.env.RUN_KEEPER.get(scope.env.RUN_KEEPER.idFromName(keeperName(admitted.projectId, runId)));
  const signal = request.signal as AbortSignal | undefined;
  // `waitUntil`: the caller is gone, and the Worker has 30 s more for this one call.
  const left = () => scope.ctx.waitUntil(keeper.callerLeft(runId).catch(() => undefined));
  signal?.addEventListener("abort", left, { once: true });
  let answer: KeeperAnswer;
  try {
    answer = await keeper.run(onWire(appRequest), kept);
  } catch (error) {
    signal?.removeEventListener("abort", left);
    // The keeper was reset before it answered (a restart, an eviction): its alarm ends the run
    // `interrupted` (and hands on its outcome), and the run's status URL says so; the app is never
    // called again for it. Answered here, not thrown: the run's outcome is the keeper's.
    const interrupted = new ApiError(
      "run_interrupted",
      "The run was interrupted: its keeper stopped before the app's answer was ready. It is not run again.",
      { ...runMeta(runId), cause: error },
    );
    return responseOf(failureAnswer(interrupted, scope.requestId), runId);
  }
  if (answer.kind === "answered") return answer.response;
  if (answer.kind === "whole") {
    const response = responseOf({ ...answer.answer, failure: null }, runId);
    response.headers.set("Preference-Applied", `wait=${wait}`);
    return response;
  }
  signal?.removeEventListener("abort", left);
  if (answer.kind === "busy") {
    const busy = new ApiError(
      "service_unavailable",
      "Too many waited runs of this project are in flight (KEEPER_RUNS_MAX); retry after Retry-After, or start the run with ?async=true.",
      { ...runMeta(runId), headers: { "Retry-After": "1", "X-Run-Id": runId } },
    );
    // Nothing was called: the run ends here, with this problem as its outcome.
    notTaken(busy);
    throw busy;
  }
  return handedOver(request, admitted, runId, wait);
}

/** The 202 of a handed-over run: the run resource (the async 202's own shape) and `Location`. */
function handedOver(request: Request, admitted: AdmittedRun, runId: string, wait: number): Response {
  const body = acceptedBody(request.url, {
    id: runId,
    status: "running",
    projectId: admitted.projectId,
    appName: admitted.appName,
  });
  return new Response(JSON.stringify(body), {
    status: 202,
    headers: {
      "Content-Type": "application/json",
      Location: body.status_url,
      "X-Run-Id": runId,
      "Preference-Applied": `wait=${wait}`,
      "Cache-Control": "no-store",
    },
  });
}
