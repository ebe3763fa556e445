import type { Database } from "../db/client";
import { StatementGroup } from "../db/statement-group";
import type { AttemptOutcome } from "../db/schema";
import type { Deps } from "../platform/deps";
import type { Config } from "../platform/env";
import { isTimeout } from "../platform/http";
import type { Scope } from "../platform/scope";
import type { DeliveryMessage } from "./enqueue";
import { BODY_BUDGET_BYTES, Semaphore } from "./limits";
import { type AttemptOutcome as Outcome, classifyStatus, MAX_ATTEMPTS, retryDelaySeconds } from "./policy";
import { openSecret } from "./secret-box";
import { signatureHeaders } from "./sign";
import { type AttemptResult, claimAttempt, failPending, recordAttempt } from "./store";
import { log } from "../platform/log";

/**
 * A delivery's attempts, start to end: claim attempt n in D1, POST, record the outcome, pause, claim
 * attempt n+1. Its lane (lane.ts) runs this for each delivery it holds; the pause is a timer inside
 * the lane's invocation, so one receiver's slowness never delays another delivery's retry. D1 holds
 * the attempt count (store.ts): an attempt is claimed there before its request is sent, so a lane that
 * dies mid-attempt and resumes never makes a fourth. docs/webhooks.md explains the limits.
 */

/** Writes of an attempt's outcome tried before the message is handed back to the queue. */
const RECORD_TRIES = 2;
/**
 * How long a write (an attempt's outcome, or the claim of a next attempt) waits for a neighbour whose
 * request is still in flight, to go to D1 in the same round trip. Short against the pause between
 * attempts and the 1 s left of the 5 s gap, long against a loopback or same-region answer.
 */
const WRITE_WINDOW_MS = 25;
/** Room kept before a body for `id.timestamp.`, so the signed content is laid out without copying the body. */
const PREFIX_ROOM = 96;

/** What a run of deliveries shares: one lane's invocation (or a test's). */
export interface DeliveryContext {
  env: Env;
  config: Config;
  deps: Deps;
  db: Database;
  /** Body bytes held at once (limits.ts). */
  budget: Semaphore;
  /** The claims and outcomes of this invocation's deliveries, written together (see `StatementGroup`). */
  writes: StatementGroup;
}

/** How a delivery's run ended: settled (or nothing left to do), or to be tried again after `delayMs` because D1 failed. */
export type RunEnd = { kind: "done" } | { kind: "again"; delayMs: number };

export interface RunHooks {
  /** Told before each pause, with when (wall clock, ms) the next attempt is due: the lane stores it, so a crash resumes on time. */
  pausing?(dueAt: number): void;
}

export const newDeliveryContext = (scope: Scope, parts: Partial<Pick<DeliveryContext, "budget" | "writes">> = {}): DeliveryContext => ({
  env: scope.env,
  config: scope.config,
  deps: scope.deps,
  db: scope.db,
  budget: parts.budget ?? new Semaphore(BODY_BUDGET_BYTES),
  writes: parts.writes ?? new StatementGroup(scope.db, WRITE_WINDOW_MS),
});


/** One line per failed delivery, for alerting; never the secret or the body. */
export function logFailure(fields: { id: string; runId: string; projectId: string; endpoint: string }, attempts: number, reason: string, last: { statusCode?: number | null; error?: string | null } = {}) {
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

/** A body held once, with room before it for the signed prefix. */
class HeldBody {
  constructor(
    private readonly buffer: Uint8Array,
    readonly size: number,
  ) {}

  get bytes(): Uint8Array {
    return this.buffer.subarray(PREFIX_ROOM, PREFIX_ROOM + this.size);
  }

  /** `prefix` + body as one view: the prefix is written into the room before the body. */
  signed(prefix: Uint8Array): Uint8Array | undefined {
    if (prefix.byteLength > PREFIX_ROOM) return undefined;
    const start = PREFIX_ROOM - prefix.byteLength;
    this.buffer.set(prefix, start);
    return this.buffer.subarray(start, PREFIX_ROOM + this.size);
  }
}

class BodyMissing extends Error {}

async function loadBody(env: Env, message: DeliveryMessage): Promise<HeldBody> {
  if ("inline" in message.body) {
    const bytes = new TextEncoder().encode(message.body.inline);
    const buffer = new Uint8Array(PREFIX_ROOM + bytes.byteLength);
    buffer.set(bytes, PREFIX_ROOM);
    return new HeldBody(buffer, bytes.byteLength);
  }
  const object = await env.WEBHOOK_BODIES.get(message.body.r2);
  if (!object) throw new BodyMissing();
  // Read straight into the one buffer the delivery keeps: no intermediate string or copy.
  const buffer = new Uint8Array(PREFIX_ROOM + object.size);
  let offset = PREFIX_ROOM;
  const reader = object.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (offset + value.byteLength > buffer.byteLength) {
      await reader.cancel().catch(() => undefined);
      throw new Error("stored body is larger than its recorded size");
    }
    buffer.set(value, offset);
    offset += value.byteLength;
  }
  return new HeldBody(buffer, offset - PREFIX_ROOM);
}

const encoder = new TextEncoder();

/** One POST. Its timeout starts here, when the request is actually sent (the caller holds a connection lane). */
async function post(deps: Deps, config: Config, message: DeliveryMessage, body: HeldBody, secret: string | null, at: Date): Promise<{ outcome: Outcome; retryAfter: string | null; durationMs: number }> {
  const headers: Record<string, string> = { "Content-Type": "application/json", "User-Agent": "edge-gateway-webhooks/1" };
  if (secret !== null) {
    const timestamp = Math.floor(at.getTime() / 1000);
    // The message's id, not the record's: a resend carries its original's, with this attempt's timestamp.
    const id = message.messageId ?? message.id;
    const content = body.signed(encoder.encode(`${id}.${timestamp}.`));
    Object.assign(headers, await signatureHeaders(secret, id, timestamp, body.bytes, content));
  }
  const controller = new AbortController();
  const started = Date.now();
  const timer = setTimeout(() => controller.abort(new DOMException(`No answer within ${config.webhookTimeoutMs} ms`, "TimeoutError")), config.webhookTimeoutMs);
  try {
    const response = await deps.outbound.fetch(new Request(message.endpoint, { method: "POST", headers, body: body.bytes, redirect: "manual", signal: controller.signal }));
    // The receiver's body is not used; release the connection.
    await response.body?.cancel().catch(() => undefined);
    return { outcome: classifyStatus(response.status), retryAfter: response.headers.get("Retry-After"), durationMs: Date.now() - started };
  } catch (error) {
    const kind = controller.signal.aborted || isTimeout(error) ? "timeout" : "connection_failed";
    return { outcome: { kind: "retry", error: kind }, retryAfter: null, durationMs: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

/** Records an attempt, tried twice; false when D1 would not take it. */
async function record(ctx: DeliveryContext, message: DeliveryMessage, attempt: number, at: Date, result: AttemptResult, outcome: AttemptOutcome): Promise<boolean> {
  for (let tries = 1; ; tries++) {
    try {
      await recordAttempt(ctx.db, message.id, attempt, at, result, outcome, ctx.writes);
      return true;
    } catch (error) {
      log("error", "webhook attempt not recorded", { delivery_id: message.id, attempt, tries, error });
      if (tries >= RECORD_TRIES) return false;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * A claim refused although the delivery is pending: every attempt is claimed. An attempt writes its
 * outcome within its timeout; a claim older than that plus a margin belongs to a run that died (or
 * whose D1 write failed), and its outcome will never come. A younger one may still be writing.
 */
async function settleExhausted(ctx: DeliveryContext, message: DeliveryMessage, claim: { attempts: number; updatedAt: Date }): Promise<RunEnd> {
  const lostAfterMs = ctx.config.webhookTimeoutMs + 30_000;
  const age = ctx.deps.now().getTime() - claim.updatedAt.getTime();
  if (age < lostAfterMs) return { kind: "again", delayMs: lostAfterMs - age };
  if (await failPending(ctx.db, message.id, ctx.deps.now(), "outcome_not_recorded")) {
    logFailure(message, claim.attempts, "the last attempt's outcome was never recorded");
  }
  return { kind: "done" };
}

const DONE: RunEnd = { kind: "done" };

/**
 * One delivery, from its next attempt to its end: claims, attempts and their records, the pauses
 * between them. Throws only when D1 refuses a claim (the caller tries again later; D1's count is kept).
 */
export async function runDelivery(ctx: DeliveryContext, message: DeliveryMessage, hooks: RunHooks = {}): Promise<RunEnd> {
  const { env, config, deps, db } = ctx;
  let claim = await claimAttempt(db, message, deps.now(), ctx.writes);
  if (claim.kind === "settled" || claim.kind === "gone") return DONE;
  if (claim.kind === "exhausted") return settleExhausted(ctx, message, claim);

  const releaseBytes = await ctx.budget.acquire(PREFIX_ROOM + message.bodyBytes);
  try {
    let body: HeldBody | undefined;
    let secret: string | null | undefined = message.secret ? undefined : null;
    for (;;) {
      const attempt = claim.attempt;
      const at = deps.now();
      let result: AttemptResult;
      let outcome: AttemptOutcome;
      let reason = "attempts exhausted";
      let retryAfter: string | null = null;
      const last = attempt >= MAX_ATTEMPTS;
      try {
        body ??= await loadBody(env, message);
        if (secret === undefined) secret = await openSecret(config.webhookEncryptionKey, message.id, message.secret!, config.previous.webhookEncryptionKey);
        // Its outcome is written next: neighbours' writes wait for it (briefly) to share the round trip.
        const sent = await post(deps, config, message, body, secret, at).finally(ctx.writes.hold());
        result = { ...sent.outcome, durationMs: sent.durationMs };
        retryAfter = sent.retryAfter;
        if (sent.outcome.kind === "delivered") outcome = "delivered";
        else if (sent.outcome.kind === "permanent") [outcome, reason] = ["failed", "permanent failure"];
        else outcome = last ? "failed" : "retry";
      } catch (error) {
        if (error instanceof BodyMissing) [result, outcome, reason] = [{ error: "body_missing", durationMs: 0 }, "failed", "stored body missing"];
        else if (secret === undefined && error instanceof Error && error.name === "OperationError") {
          [result, outcome, reason] = [{ error: "secret_unreadable", durationMs: 0 }, "failed", "secret could not be decrypted (WEBHOOK_ENCRYPTION_KEY changed?)"];
        } else {
          // Storage hiccup: another attempt may read it; the last one must not leave the record pending.
          [result, outcome, reason] = [{ error: "body_unavailable", durationMs: 0 }, last ? "failed" : "retry", `stored body unreadable: ${String(error)}`];
        }
      }
      const ended = Date.now();
      if (!(await record(ctx, message, attempt, at, result, outcome))) {
        // The attempt happened but is not written. The next run claims the next attempt (the count
        // in D1 includes this one) or, after the last, settles the delivery `outcome_not_recorded`.
        return { kind: "again", delayMs: 1000 };
      }
      if (outcome !== "retry") {
        if (outcome === "failed") logFailure(message, attempt, reason, result);
        return DONE;
      }
      // The pause counts from the end of the attempt: the write above is part of it, not added to it.
      const pauseMs = retryDelaySeconds(attempt, retryAfter, at) * 1000 - (Date.now() - ended);
      hooks.pausing?.(Date.now() + Math.max(0, pauseMs));
      if (pauseMs > 0) await deps.sleep(pauseMs);
      claim = await claimAttempt(db, message, deps.now(), ctx.writes);
      if (claim.kind === "settled" || claim.kind === "gone") return DONE;
      if (claim.kind === "exhausted") return settleExhausted(ctx, message, claim);
    }
  } finally {
    releaseBytes();
  }
}
