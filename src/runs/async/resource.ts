import type { AsyncRun } from "../../db/schema";
import { ApiError } from "../../platform/errors";
import { rfc3339, rfc3339OrNull } from "../../platform/openapi";
import { readPayload, resultKey } from "./payloads";

/** What the run resource says of a run but its result. */
export type Summarized = Pick<
  AsyncRun,
  | "id"
  | "status"
  | "appName"
  | "mode"
  | "createdAt"
  | "startedAt"
  | "handedOverAt"
  | "deadlineAt"
  | "finishedAt"
  | "resultStatus"
  | "errorCode"
  | "errorMessage"
>;

/** The run resource without its result: what lists show, and the head of what the status URL answers. */
export const summary = (run: Summarized) => ({
  run_id: run.id,
  status: run.status,
  app_name: run.appName,
  mode: run.mode,
  created_at: rfc3339(run.createdAt),
  started_at: rfc3339OrNull(run.startedAt),
  handed_over_at: rfc3339OrNull(run.handedOverAt),
  deadline_at: rfc3339OrNull(run.deadlineAt),
  finished_at: rfc3339OrNull(run.finishedAt),
  status_code: run.resultStatus,
  error: run.errorCode ? { code: run.errorCode, message: run.errorMessage ?? "" } : null,
});

/** The run as JSON, its stored result spliced in as it is, so `result` keeps the exact bytes of the answer. */
export function runJson(run: Summarized, result: string | null): string {
  return `${JSON.stringify(summary(run)).slice(0, -1)},"result":${result ?? "null"}}`;
}

/**
 * The run resource as the status URL serves it (polled, or as an event of its stream), its result read
 * from D1 or R2. A result in R2 that cannot be read this time is a 503 to retry, never a `null` result.
 */
export async function resourceText(
  env: Env,
  run: Summarized & Pick<AsyncRun, "result" | "resultInR2">,
): Promise<string> {
  const result = await readPayload(env, resultKey(run.id), run.result, run.resultInR2);
  if (result === null && run.resultInR2) {
    throw new ApiError("service_unavailable", "The run's result could not be read this time; retry the request.", {
      headers: { "Retry-After": "1" },
    });
  }
  return runJson(run, result);
}
