/**
 * One run as the usage store keeps it: what the caller got, how long it took, how many bytes each way.
 * No body, no header, no token: `caller` names the run key's holder as the run path knows it
 * (`sa:<service account id>`, `user:<person id>`, `jwt:<subject>`, `admin`), never the credential.
 * Taken once per run, when the run's outcome is known (the caller's answer has ended, or the async run
 * has finished), whatever that outcome is.
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
  /** Whether the caller asked for a webhook; its outcome is the delivery's own record (`webhook_deliveries`). */
  webhook: boolean;
  /** The request that made the run: the `request_id` of its answer and its log line. */
  request_id: string;
  /** Epoch milliseconds of the run's admission. */
  created_at: number;
}

/**
 * What crossed of an app's passed-through body, counted by the run path as it reads it
 * (src/runs/call.ts): decoded bytes, when the first came, and how the body ended.
 */
export interface BodyTally {
  bytes: number;
  firstByteAt: number | null;
  /** Resolves once the body ended: read to its end, cancelled (the caller went), silent too long, or broken. */
  ended: Promise<"done" | "cancelled" | "idle" | "broken">;
}
