/**
 * The delivery rules of spec section 7 and 8, in one place the consumer and the wrangler.toml check share.
 * Pure: no Workers imports.
 */
export const MAX_ATTEMPTS = 3;
/** Delay before attempt 2 and attempt 3 when the receiver does not ask for one (`Retry-After`). */
export const RETRY_DELAYS_SECONDS = [1, 3] as const;
/**
 * The queue redelivers a retried message after its delay plus the consumer's `max_batch_timeout`
 * (1 s in wrangler.toml), so 4 s is the longest delay that keeps attempts at most 5 s apart.
 */
export const MAX_RETRY_DELAY_SECONDS = 4;
/** Bodies up to this size ride in the queue message (limit 128 KB with the other fields); larger ones wait in R2. */
export const INLINE_BODY_MAX_BYTES = 64 * 1024;

export type AttemptOutcome =
  | { kind: "delivered"; statusCode: number }
  | { kind: "retry"; statusCode?: number; error?: string }
  | { kind: "permanent"; statusCode: number };

/** Spec section 7: 2xx delivered; 404, other non-2xx outside 4xx/5xx (redirects too) retried; other 4xx and all 5xx final. */
export function classifyStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return { kind: "delivered", statusCode: status };
  if (status === 404) return { kind: "retry", statusCode: status };
  if (status >= 400 && status < 600) return { kind: "permanent", statusCode: status };
  return { kind: "retry", statusCode: status };
}

/** Seconds to wait before the next attempt, `Retry-After` (seconds or HTTP date) honoured up to the cap. */
export function retryDelaySeconds(attempt: number, retryAfter: string | null, now: Date): number {
  const fallback = RETRY_DELAYS_SECONDS[Math.min(attempt - 1, RETRY_DELAYS_SECONDS.length - 1)]!;
  if (!retryAfter) return fallback;
  let seconds = /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter.trim()) : (Date.parse(retryAfter) - now.getTime()) / 1000;
  if (!Number.isFinite(seconds)) return fallback;
  seconds = Math.ceil(seconds);
  return Math.max(0, Math.min(seconds, MAX_RETRY_DELAY_SECONDS));
}
