import { log } from "../platform/log";
import { type DeliveryContext, DeliveryInProgress } from "./attempt/context";
import { type Prepared, prepare, signedAt } from "./attempt/prepare";
import { writeAttempt } from "./attempt/write";
import { type Next, schedule } from "./attempt/schedule";
import { send, type SentAttempt, unsent } from "./attempt/send";
import type { DeliveryMessage } from "./message";
import { failPending } from "./store";
import type { ReceiverStates } from "./receiver-controls";
import { afterAttempt } from "./receiver-stops";

/**
 * A delivery's attempts, start to end, as a chain of named steps (Svix's worker is the model):
 *
 *     prepare  → Prepared       claim attempt n in D1, lay out its request (body, secret)
 *     (slot)                    a lane claims ahead of its slots: the attempt waits for one here
 *     sign     → SignedAttempt  its headers, signed for the moment it is sent (its recorded start)
 *     send     → SentAttempt    one POST, its timeout from the moment it is sent; its outcome
 *     write    → WrittenAttempt one INSERT (a trigger settles the delivery)
 *     schedule → Next           settled, a pause before attempt n+1, or interrupted
 *
 * Its lane (lane.ts) runs one attempt at a time per delivery (`attempt`) and keeps the pause as a row
 * with the next attempt's time, so a pause holds no connection. docs/webhooks.md explains the limits.
 */

/** How a delivery's attempts ended: settled (or nothing left to do), or interrupted by D1, to be taken up again after `ms`. */
export type DeliveryEnd = { kind: "settled" } | { kind: "interrupted"; ms: number };

const SETTLED: DeliveryEnd = { kind: "settled" };
/** A claim D1 refused: nothing was sent for it. */
const CLAIM_REFUSED_RETRY_MS = 1_000;

/** One line per failed delivery, for alerting; never the secret or the body. */
export function logFailure(
  fields: { id: string; runId: string; projectId: string; endpoint: string },
  attempts: number,
  reason: string,
  last: { statusCode?: number | null; error?: string | null } = {},
) {
  let host = "";
  try {
    host = new URL(fields.endpoint).host;
  } catch {
    // An endpoint is checked before it is stored; a row edited by hand still gets its log line.
  }
  log("error", "webhook delivery failed", {
    reason,
    delivery_id: fields.id,
    run_id: fields.runId,
    project_id: fields.projectId,
    endpoint_host: host,
    attempts,
    last_status_code: last.statusCode ?? null,
    last_error: last.error ?? null,
  });
}

/**
 * A claim refused although the delivery is pending: every attempt is claimed. An attempt writes its
 * outcome within its timeout; a claim older than that plus a margin belongs to a lane that died (or
 * whose D1 write failed), and its outcome will never come. A younger one may still be writing.
 */
async function settleExhausted(
  ctx: DeliveryContext,
  message: DeliveryMessage,
  claim: Extract<Prepared, { kind: "exhausted" }>,
): Promise<DeliveryEnd> {
  const lostAfterMs = ctx.config.webhookTimeoutMs + 30_000;
  const age = ctx.deps.now().getTime() - claim.updatedAt.getTime();
  if (age < lostAfterMs) return { kind: "interrupted", ms: lostAfterMs - age };
  if (await failPending(ctx.log(message).db, message.id, ctx.deps.now(), "outcome_not_recorded")) {
    logFailure(message, claim.attempts, "the last attempt's outcome was never recorded");
  }
  return SETTLED;
}

/**
 * How one attempt ended, for its lane: the delivery settled, its next attempt due at `dueAt` (the end of
 * this one, `endedAt`, plus the pause; wall clock, ms), or interrupted by D1 (taken up again after `ms`).
 */
export type AttemptEnd = DeliveryEnd | { kind: "pause"; dueAt: number; endedAt: number };

/** What a lane gives one attempt: its receiver's state, a slot to wait for before the send, and a call at the answer. */
export interface AttemptLane {
  receivers?: ReceiverStates;
  /** Resolves when the attempt may send (its lane's slot): the claim and the body are ready before it. */
  slot?: () => Promise<void>;
  /** The request is over (answered, timed out, or never sent): its slot is free. */
  answered?: () => void;
}

/**
 * One attempt of a delivery: prepare → (its slot) → send → record → schedule. The lane runs this for each attempt
 * and keeps the pause itself (a row with the next attempt's time), so a delivery between attempts holds
 * no connection and no memory: `delivery` is the attempt's own unless the caller keeps one across them.
 */
export async function attempt(
  ctx: DeliveryContext,
  delivery: DeliveryInProgress,
  lane: AttemptLane = {},
): Promise<AttemptEnd> {
  const { receivers, answered = () => undefined } = lane;
  const { message } = delivery;
  let prepared: Prepared;
  try {
    prepared = await prepare(ctx, delivery);
  } catch (error) {
    log("error", "webhook delivery interrupted: claim refused", {
      delivery_id: message.id,
      project_id: message.projectId,
      error,
    });
    return { kind: "interrupted", ms: CLAIM_REFUSED_RETRY_MS };
  }
  if (prepared.kind === "settled") return SETTLED;
  if (prepared.kind === "exhausted") return await settleExhausted(ctx, message, prepared);
  let sent: SentAttempt;
  if (prepared.kind === "ready") {
    // Claimed and laid out ahead of its lane's slot: it waits for one, then is stamped and signed as it is sent.
    if (lane.slot) await lane.slot();
    const signed = await signedAt(delivery, prepared, lane.slot ? ctx.deps.now() : prepared.at);
    // Its outcome is written next: neighbours' writes wait for it (briefly) to share the round trip.
    sent = await send(ctx.deps, signed, ctx.config.webhookTimeoutMs).finally(ctx.log(message).writes.hold());
  } else sent = unsent(prepared);
  // The request is over (its lane's slot is free; its outcome is written next).
  answered();
  const next: Next = schedule(await writeAttempt(ctx, message, sent), Date.now());
  // A receiver that said stop is disabled; a failed delivery is told to the alert endpoint; a
  // delivered one may start the automatic recovery (receiver-stops.ts).
  if (sent.says || sent.outcome !== "retry") await afterAttempt(ctx, message, sent, receivers);
  if (next.kind === "settled") {
    if (next.outcome === "failed") logFailure(message, sent.attempt, sent.reason, sent);
    return SETTLED;
  }
  // The attempt happened but is not written: the next try claims the next attempt or settles.
  if (next.kind === "interrupted") return next;
  return { kind: "pause", dueAt: Date.now() + next.ms, endedAt: sent.endedAt };
}

/**
 * One delivery, from its next attempt to its end, its pauses slept on `ctx.deps.sleep`: the attempts
 * of one delivery in a row, as tests drive them on a fake clock (lanes run `attempt` instead).
 */
export async function deliver(
  ctx: DeliveryContext,
  message: DeliveryMessage,
  receivers?: ReceiverStates,
): Promise<DeliveryEnd> {
  const delivery = new DeliveryInProgress(message);
  try {
    for (;;) {
      const end = await attempt(ctx, delivery, { receivers });
      if (end.kind !== "pause") return end;
      const ms = end.dueAt - Date.now();
      if (ms > 0) await ctx.deps.sleep(ms);
    }
  } finally {
    delivery.release();
  }
}
