import { retryDelaySeconds } from "../policy";
import type { WrittenAttempt } from "./write";

/** The last step: what the delivery does after this attempt. */
export type Next =
  /** Delivered, or failed for good: the lane forgets it. */
  | { kind: "settled"; outcome: "delivered" | "failed" }
  /** The next attempt, after `ms`. */
  | { kind: "pause"; ms: number }
  /** The attempt happened but D1 did not take its record: the lane takes the delivery up again after `ms`. */
  | { kind: "interrupted"; ms: number };

/** After an unrecorded attempt, the lane's next try claims the next attempt (D1's count includes this one) or settles. */
export const INTERRUPTED_RETRY_MS = 1_000;

/**
 * Decides, from the recorded attempt, whether there is a next one and when (`now`: wall clock, ms).
 * The pause counts from the end of the attempt's request, so the outcome's D1 write is inside it,
 * not added to it. Pure.
 */
export function schedule({ sent, recorded }: WrittenAttempt, now: number): Next {
  if (!recorded) return { kind: "interrupted", ms: INTERRUPTED_RETRY_MS };
  if (sent.outcome !== "retry") return { kind: "settled", outcome: sent.outcome };
  const ms = retryDelaySeconds(sent.attempt, sent.retryAfter, sent.at) * 1000 - (now - sent.endedAt);
  return { kind: "pause", ms: Math.max(0, ms) };
}
