import type { Scope } from "../platform/scope";
import { holdRecord } from "./buffer";
import type { RunRecord } from "./run-record";

// The record's shape is in a file of its own, which the store's side (buffer, ledger) reads too.
export type { BodyTally, RunRecord } from "./run-record";

/**
 * Hands a run's record to the usage store. Never awaited on a run's path and never throws: the record
 * waits in the isolate's buffer and leaves with others in `waitUntil` (src/usage/buffer.ts), so
 * recording cannot slow or fail a run.
 */
export function recordRun(scope: Scope, record: RunRecord): void {
  try {
    holdRecord(scope, record);
  } catch {
    // A record is worth less than the run: nothing of recording may reach the caller.
  }
}
