import type { Scope } from "../platform/scope";
import type { OutcomePort, RunOutcome, RunRefusal, RunStart } from "../runs/outcome";
import { holdRecord, holdRefusal, holdStart } from "./buffer";
import type { RunRecord } from "./run-record";

export type { RunRecord } from "./run-record";

/** `at` as ms after `from`, whole and never negative; null stays null. */
const after = (from: number, at: number | null) => (at === null ? null : Math.max(0, Math.round(at - from)));

/** A run's outcome as the row usage keeps of it. */
export function recordOf(outcome: RunOutcome): RunRecord {
  const { times, failure } = outcome;
  const from = times.acceptedAt;
  return {
    run_id: outcome.runId,
    project_id: outcome.projectId,
    app_name: outcome.appName,
    mode: outcome.mode,
    method: outcome.method,
    path: outcome.path,
    status_code: outcome.status,
    ending: outcome.ending,
    failure: failure === null ? null : failure.by === "gateway" ? `gateway:${failure.code}` : `app:${failure.status}`,
    duration_ms: after(from, times.endedAt)!,
    ttfb_ms: after(from, times.firstByteAt),
    called_ms: after(from, times.calledAt),
    answered_ms: after(from, times.answeredAt),
    handed_over_ms: after(from, times.handedOverAt),
    bytes_in: outcome.bytesIn,
    bytes_out: outcome.bytesOut,
    caller: outcome.caller,
    webhook: outcome.webhook,
    request_id: outcome.requestId,
    created_at: from,
  };
}

/**
 * Hands a run's outcome to the usage store as its record. Never awaited on a run's path and never
 * throws: the record waits in the isolate's buffer and leaves with others in `waitUntil`
 * (src/usage/buffer.ts), so recording cannot slow or fail a run.
 */
export function recordRun(scope: Scope, outcome: RunOutcome): void {
  try {
    holdRecord(scope, recordOf(outcome));
  } catch {
    // A record is worth less than the run: nothing of recording may reach the caller.
  }
}

/**
 * A run admitted: held as under way until its record comes (src/usage/buffer.ts `holdStart`). Never
 * awaited, never throws, as a record.
 */
export function recordStart(scope: Scope, start: RunStart): void {
  try {
    holdStart(scope, {
      run_id: start.runId,
      project_id: start.projectId,
      app_name: start.appName,
      mode: start.mode,
      method: start.method,
      path: start.path,
      caller: start.caller,
      request_id: start.requestId,
      created_at: start.acceptedAt,
    });
  } catch {
    // A start is worth less than the run.
  }
}

/** A request refused before its app was known: counted per project, hour and reason, never a record (src/usage/refusals.ts). */
export function countRefusal(scope: Scope, refusal: RunRefusal): void {
  try {
    holdRefusal(scope, refusal);
  } catch {
    // A count is worth less than the answer: nothing of counting may reach the caller.
  }
}

/** Usage as the receiver of runs' outcomes: what the root hands every owner of a run. */
export const usageOutcomes: OutcomePort = { started: recordStart, ended: recordRun, refused: countRefusal };
