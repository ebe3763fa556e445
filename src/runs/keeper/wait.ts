import { ApiError } from "../../platform/errors";
import type { Scope } from "../../platform/scope";
import type { AdmittedRun } from "../admit";
import { acceptedBody, idempotencyKeyOf, requestHashOf } from "../async/accept";
import { onWire } from "../app-request";
import { type AppRequest, runMeta } from "../call";
import { keeperName, keeperObject } from "./shard";
import type { BusyReason, KeeperAnswer, KeptRun, KeyedAnswer } from "./message";
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
  // With a key, the run id is in the key's shard (admit.ts `startOf`): a retry reaches the same keeper.
  const key = idempotencyKeyOf(request);
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
    key: key === null ? null : { value: key, requestHash: await requestHashOf(request, admitted) },
  };
  const keeper = keeperObject(scope.env, keeperName(admitted.projectId, runId));
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
  const refused =
    answer.kind === "busy"
      ? busyProblem(answer.reason, runId)
      : answer.kind === "keyed" && answer.answer.kind === "reused"
        ? keyReused(answer.runId)
        : answer.kind === "keyed" && answer.answer.kind === "answered"
          ? answerNotKept(answer.runId)
          : null;
  if (refused !== null) {
    // Nothing was called: this request ends here, with this problem as its outcome (a record of its own).
    notTaken(refused);
    throw refused;
  }
  if (answer.kind === "keyed" && (answer.answer.kind === "whole" || answer.answer.kind === "run"))
    return keyedResponse(request, admitted, answer.runId, answer.answer, wait);
  return handedOver(request, admitted, runId, "running", wait);
}

/** The refusal of a run its keeper did not take: 503 when the keeper is full, 429 when the caller holds its share. */
function busyProblem(reason: BusyReason, runId: string): ApiError {
  const headers = { "Retry-After": "1", "X-Run-Id": runId };
  const or = "retry after Retry-After, or start the run with ?async=true.";
  const detail: Record<BusyReason, string> = {
    runs: `Too many waited runs of this project are in flight (KEEPER_RUNS_MAX); ${or}`,
    bytes: `The waited runs of this project in flight hold as many request bytes as they may; ${or}`,
    caller: `This caller holds its share of this project's waited runs in flight; ${or}`,
    handed_over: `This caller's handed-over runs fill this project's room for them; ${or}`,
  };
  const code = reason === "caller" || reason === "handed_over" ? "rate_limited" : "service_unavailable";
  return new ApiError(code, detail[reason], { ...runMeta(runId), headers });
}

/** The 422 of a key used before for a different request, as an async run's (naming the key's run). */
const keyReused = (runId: string) =>
  new ApiError(
    "idempotency_key_reused",
    `The Idempotency-Key was used for run ${runId} with a different request (method, app, query, webhook or body) in the last 24 hours.`,
    { extensions: { run_id: runId } },
  );

/** The 409 of a key whose run was answered to the request that waited for it: that answer is not kept. */
const answerNotKept = (runId: string) =>
  new ApiError(
    "conflict",
    `The Idempotency-Key names run ${runId}, whose answer went to the request that waited for it; a waited run's answer is not kept. Use a new key to run it again.`,
    { extensions: { run_id: runId } },
  );

/** A retry under a key that names run `runId`: its stored answer, or its run resource. */
function keyedResponse(
  request: Request,
  admitted: AdmittedRun,
  runId: string,
  answer: Extract<KeyedAnswer, { kind: "whole" | "run" }>,
  wait: number,
): Response {
  const response =
    answer.kind === "whole"
      ? responseOf({ ...answer.answer, failure: null }, runId)
      : handedOver(request, admitted, runId, answer.status, wait);
  response.headers.set("Preference-Applied", `wait=${wait}`);
  response.headers.set("Idempotent-Replayed", "true");
  return response;
}

/** The 202 of a handed-over run: the run resource (the async 202's own shape) and `Location`. */
function handedOver(
  request: Request,
  admitted: AdmittedRun,
  runId: string,
  status: "running" | "succeeded" | "failed",
  wait: number,
): Response {
  const body = acceptedBody(request.url, {
    id: runId,
    status,
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
