import type { RunEnding, RunMode } from "../runs/outcome";

/**
 * One run as the usage store keeps it: a run's outcome (src/runs/outcome.ts) as a row, made by
 * `recordOf` (src/usage/record.ts). What the caller got, how the run ended and whose failure it was,
 * its moments as ms after its acceptance, how many bytes each way. No body, no header, no token:
 * `caller` names the run key's holder (`sa:<service account id>`, `user:<person id>`,
 * `jwt:<subject>`, `admin`), never the credential. The same shape travels on the `usage-records` queue.
 */
export interface RunRecord {
  run_id: string;
  project_id: string;
  app_name: string;
  mode: RunMode;
  /** The caller's method and the app's path under the app (`run`, `v1/chat/completions`), no query. */
  method: string;
  path: string;
  /** The status the caller got (for an async run, the status its stored result carries). */
  status_code: number;
  ending: RunEnding;
  /** Whose failure: `gateway:<problem code>` or `app:<status>`; null when the run failed nobody. */
  failure: string | null;
  /** From acceptance to the run's end. */
  duration_ms: number;
  /** From acceptance to the first byte of a passed-through answer; null otherwise. */
  ttfb_ms: number | null;
  /** From acceptance to the app's call; null when the app was never called. */
  called_ms: number | null;
  /** From acceptance to the app's response headers; null when it gave none. */
  answered_ms: number | null;
  /** From acceptance to a waited run's hand-over; null when it was not handed over. */
  handed_over_ms: number | null;
  bytes_in: number;
  bytes_out: number;
  caller: string;
  /** Whether the caller asked for a webhook; its outcome is the delivery's own record (`webhook_deliveries`). */
  webhook: boolean;
  /** The request that made the run: the `request_id` of its answer and its log line. */
  request_id: string;
  /** Epoch milliseconds of the run's acceptance. */
  created_at: number;
}

/**
 * A run under way, as the usage store learns of it at its admission (src/usage/buffer.ts `holdStart`):
 * what is known before the run has ended. Its record (`RunRecord`, same `run_id`) closes it. A start
 * costs the run what a record does (a push into the isolate's buffer); one whose record comes within the
 * same flush never leaves the isolate, so a short run costs the ledger nothing more.
 */
export type RunStartRecord = Pick<
  RunRecord,
  "run_id" | "project_id" | "app_name" | "mode" | "method" | "path" | "caller" | "request_id" | "created_at"
>;

/** Endings that count as a timeout in the usage figures: the gateway's time limits, and the caller's deadline. */
export const endedInTimeout = (ending: RunEnding) => ending === "timeout" || ending === "deadline";

/** A status class as the API names it: every answer below 400 (a WebSocket's 101, an app's redirect) counts as 2xx. */
export type StatusClass = "2xx" | "4xx" | "5xx";
export const classOf = (status: number): StatusClass => (status >= 500 ? "5xx" : status >= 400 ? "4xx" : "2xx");

/** Every mode and every ending a record may hold: what the API document lists and a queue message is checked against. */
export const RUN_MODES = ["sync", "wait", "async"] as const satisfies readonly RunMode[];
export const RUN_ENDINGS = [
  "answered",
  "hung_up",
  "timeout",
  "deadline",
  "unreachable",
  "refused",
  "interrupted",
  "error",
] as const satisfies readonly RunEnding[];
// A mode or ending the lists lack fails the type check here (a record holding it would be refused).
const everyMode: Exclude<RunMode, (typeof RUN_MODES)[number]> extends never ? true : never = true;
const everyEnding: Exclude<RunEnding, (typeof RUN_ENDINGS)[number]> extends never ? true : never = true;
void [everyMode, everyEnding];

/**
 * Whose failure a run was, as the figures split them: the app's (its own 5xx; unreachable, too slow
 * for the gateway's limits, or without a deployment), the caller's (a request the gateway refused: size,
 * type, method, a bad parameter or header, a reused key; the app's own 4xx, its verdict on the request;
 * the caller's own `Cancel-After` passed), or the gateway's (a fault of its own: 5xx problems, a run
 * whose owner was stopped). `null` when nobody failed (an answer below 400, a caller who hung up).
 * The app's error rate counts only its own failures, so a caller's mistakes never count against it.
 */
export type Whose = "app" | "caller" | "gateway";
export const WHOSE: readonly Whose[] = ["app", "caller", "gateway"];

/** Gateway problems that are the app's failure: it could not be reached, answered too slowly, or had no deployment. */
const APPS_PROBLEMS = new Set(["bad_gateway", "gateway_timeout", "no_deployment"]);
/** The caller's own deadline (`Cancel-After`): a 504, but the caller chose it. */
const CALLERS_PROBLEMS = new Set(["run_deadline"]);

/** Whose failure a record's `failure` (`gateway:<code>`, `app:<status>`) was; the status the caller got decides a code not listed. */
export function whoseFailure(failure: string | null, status: number): Whose | null {
  if (failure === null) return null;
  const colon = failure.indexOf(":");
  const by = failure.slice(0, colon);
  const what = failure.slice(colon + 1);
  if (by === "app") return Number(what) >= 500 ? "app" : "caller";
  if (APPS_PROBLEMS.has(what)) return "app";
  if (CALLERS_PROBLEMS.has(what)) return "caller";
  return status >= 500 ? "gateway" : "caller";
}
