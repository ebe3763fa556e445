import { ApiError } from "../../platform/errors";
import type { Scope } from "../../platform/scope";
import type { AdmittedRunIn } from "../admitted";
import { acceptedBody } from "../async/accept";
import { onWire } from "../app-request";
import { type AppRequest, runMeta } from "../call";
import { keeperName, keeperObject } from "./shard";
import type { BusyReason, KeeperAnswer, KeyedAnswer } from "./message";
import { failureAnswer, responseOf } from "../answer";

/**
 * A waited run (`Prefer: wait=N`), the Worker's side: the run is admitted as any run is, then its app
 * request goes to the run's keeper, which owns the app's call from here (keeper.ts). The caller gets
 * what the keeper answers: the app's answer (exactly a synchronous run's, plus `Preference-Applied`),
 * or, past the wait, 202 with the run resource and `Location`. A caller who hangs up while waiting
 * tells the keeper at once (`callerLeft`, in `waitUntil`): the run is handed over, never ended.
 */

/**
 * Hands the admitted run `run` to its keeper (`sentAfterMs` after its acceptance, by the Worker's wall
 * clock: the keeper's clock goes on from there) and answers the caller with what the keeper answers.
 * `notTaken` ends a run its keeper refused (nothing was called).
 */
export async function waitRun(
  scope: Scope,
  request: Request,
  run: AdmittedRunIn<"wait">,
  appRequest: AppRequest,
  sentAfterMs: number,
  notTaken: (error: ApiError) => void,
): Promise<Response> {
  const { runId } = run;
  const wait = run.mode.seconds;
  // With a key, the run id is in the key's shard (admit.ts `startOf`): a retry reaches the same keeper.
  const keeper = keeperObject(scope.env, keeperName(run.projectId, runId));
  const signal = request.signal as AbortSignal | undefined;
  // `waitUntil`: the caller is gone, and the Worker has 30 s more for this one call.
  const left = () => scope.ctx.waitUntil(keeper.callerLeft(runId).catch(() => undefined));
  signal?.addEventListener("abort", left, { once: true });
  let answer: KeeperAnswer;
  try {
    answer = await keeper.take(onWire(appRequest), run, sentAfterMs);
  } catch (error) {
    signal?.removeEventListener("abort", left);
    // The keeper was reset before it answered (a restart, an eviction): its alarm ends the run
    // `interrupted` (and gives the port its outcome), and the run's status URL says so; the app is never
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
    return keyedResponse(request, run, answer.runId, answer.answer, wait);
  return handedOver(request, run, runId, "running", wait);
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
  run: AdmittedRunIn<"wait">,
  runId: string,
  answer: Extract<KeyedAnswer, { kind: "whole" | "run" }>,
  wait: number,
): Response {
  const response =
    answer.kind === "whole"
      ? responseOf({ ...answer.answer, failure: null }, runId)
      : handedOver(request, run, runId, answer.status, wait);
  response.headers.set("Preference-Applied", `wait=${wait}`);
  response.headers.set("Idempotent-Replayed", "true");
  return response;
}

/** The 202 of a handed-over run: the run resource (the async 202's own shape) and `Location`. */
function handedOver(
  request: Request,
  run: AdmittedRunIn<"wait">,
  runId: string,
  status: "running" | "succeeded" | "failed",
  wait: number,
): Response {
  const body = acceptedBody(request.url, {
    id: runId,
    status,
    projectId: run.projectId,
    appName: run.appName,
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
