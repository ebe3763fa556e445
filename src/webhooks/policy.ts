/**
 * The delivery rules of spec section 7 and 8, in one place the lanes and the wrangler.toml check share.
 * Pure: no Workers imports.
 */
export const MAX_ATTEMPTS = 3;
/** Delay before attempt 2 and attempt 3 when the receiver does not ask for one (`Retry-After`). */
export const RETRY_DELAYS_SECONDS = [1, 3] as const;
/**
 * A delivery waits for its next attempt inside its lane (src/webhooks/lane.ts), so the gap is
 * this delay plus one D1 write (the claim of the next attempt, which may wait up to 25 ms to share its
 * round trip). 4 s leaves a second of the spec's 5 s for that write even when `Retry-After` asks for more.
 */
export const MAX_RETRY_DELAY_SECONDS = 4;
/** The longest gap the spec allows between the end of one attempt and the start of the next. */
export const MAX_GAP_MS = 5_000;
/**
 * A body rides in the queue message when the whole serialised message (JSON escaping can double a
 * body's size) stays within this; otherwise it waits in R2. Well under the Queues limit of 128 KB
 * per message, and it is also what a delivery row keeps of a body in D1 for resending.
 */
export const INLINE_MESSAGE_MAX_BYTES = 64 * 1024;

/**
 * Why the sweeper settled a delivery it saw no end of (src/webhooks/housekeeping.ts): no attempt was
 * ever claimed, or the last claimed one never recorded its outcome. Its message may still be waiting
 * in a queue backlog; when it arrives, the claim takes the delivery up again (src/webhooks/store.ts).
 */
export const SWEPT_REASONS = ["never_attempted", "stalled"] as const;

/**
 * What a receiver's HTTP status means for its delivery (spec section 7). An attempt's outcome, the
 * one that is recorded (`AttemptOutcome`: delivered, retry, failed), follows from it and the attempt's
 * number: a `retry` answer to the last attempt is a `failed` outcome.
 */
export type AttemptVerdict = "delivered" | "retry" | "permanent";

/** Spec section 7: 2xx delivered; 404, other non-2xx outside 4xx/5xx (redirects too) retried; other 4xx and all 5xx final. */
export function classifyStatus(status: number): AttemptVerdict {
  if (status >= 200 && status < 300) return "delivered";
  if (status === 404) return "retry";
  if (status >= 400 && status < 600) return "permanent";
  return "retry";
}

/** Seconds to wait before the next attempt, `Retry-After` (seconds or HTTP date) honoured up to the cap. */
export function retryDelaySeconds(attempt: number, retryAfter: string | null, now: Date): number {
  const fallback = RETRY_DELAYS_SECONDS[Math.min(attempt - 1, RETRY_DELAYS_SECONDS.length - 1)]!;
  if (!retryAfter) return fallback;
  let seconds = /^\d+$/.test(retryAfter.trim())
    ? Number(retryAfter.trim())
    : (Date.parse(retryAfter) - now.getTime()) / 1000;
  if (!Number.isFinite(seconds)) return fallback;
  seconds = Math.ceil(seconds);
  return Math.max(0, Math.min(seconds, MAX_RETRY_DELAY_SECONDS));
}

/** What a receiver's answer says beyond its status (Standard Webhooks, Svix): stop this message, or stop everything. */
export type ReceiverSays = "disable" | "abort-message" | null;

/** 410 Gone or `webhook-delivery: disable` disables the receiver; `webhook-delivery: abort-message` ends the delivery. */
export function receiverSays(status: number, header: string | null): ReceiverSays {
  const said = header?.trim().toLowerCase();
  if (status === 410 || said === "disable") return "disable";
  if (said === "abort-message") return "abort-message";
  return null;
}
