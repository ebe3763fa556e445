import type { Deps } from "../platform/deps";
import { ApiError, problemBody, PROBLEM_CONTENT_TYPE } from "../platform/errors";
import { callerStatus, callUpstream, envelope } from "./proxy";

/** What a run answers: the status, the exact body and its type. An async run stores exactly this. */
export interface RunAnswer {
  status: number;
  text: string;
  contentType: string;
  /** Why the upstream gave no answer (502/504), when it did not. */
  failure: ApiError | null;
}

/**
 * Calls the upstream and makes the run's answer: the envelope, or, when the upstream failed, the
 * problem a caller gets (a webhook receives it too). The synchronous run and the async consumer both
 * answer through this, so an async run's stored result is what the synchronous run would have answered.
 */
export async function answerRun(
  deps: Deps,
  target: string,
  init: Pick<RequestInit, "method" | "headers" | "body">,
  runId: string,
  timeoutMs: number,
  requestId: string,
  /** Ends the call early (a run with a webhook whose caller hung up long ago, src/runs/hang-up.ts). */
  cancel?: AbortSignal,
): Promise<RunAnswer> {
  try {
    const answer = await callUpstream(deps, target, init, runId, timeoutMs, cancel);
    return { status: callerStatus(answer.status), text: envelope(runId, answer, deps.now()), contentType: "application/json", failure: null };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return { status: error.status, text: JSON.stringify(problemBody(error, requestId)), contentType: PROBLEM_CONTENT_TYPE, failure: error };
  }
}
