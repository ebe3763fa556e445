import type { Database } from "../db/client";
import { StatementGroup } from "../db/statement-group";
import type { AttemptOutcome } from "../db/schema";
import type { Deps } from "../platform/deps";
import type { Config } from "../platform/env";
import { isTimeout } from "../platform/http";
import type { Scope } from "../platform/scope";
import { type DeliveryMessage, deliveryMessageSchema } from "./enqueue";
import { BODY_BUDGET_BYTES, DELIVERY_LANES, Semaphore } from "./limits";
import { type AttemptOutcome as Outcome, classifyStatus, MAX_ATTEMPTS, retryDelaySeconds } from "./policy";
import { openSecret } from "./secret-box";
import { signatureHeaders } from "./sign";
import { type AttemptResult, claimAttempt, failPending, recordAttempt } from "./store";

/**
 * The `webhook-deliveries` consumer. Each delivery runs its own attempts (up to 3) inside the
 * invocation, with its own timer between them, so one receiver's slowness never delays another
 * delivery's retry: the queue's ack and retry apply only when the whole invocation ends, which is
 * why they are not used to space attempts. The queue is what makes a delivery durable: a message
 * acked only once its delivery is settled, redelivered after a crash, resumes from the attempt
 * count in D1 (see store.ts). docs/webhooks.md explains the limits this is sized for.
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

export interface ConsumerHooks {
  /** Connections and body bytes per invocation (defaults: limits.ts); tests pass smaller ones and read the high-water marks. */
  lanes?: Semaphore;
  budget?: Semaphore;
  /** The invocation's grouped D1 writes; tests pass one to count its round trips. */
  writes?: StatementGroup;
}

const log = (level: "error" | "warn", msg: string, fields: Record<string, unknown>) => {
  const line = JSON.stringify({ level, msg, ...fields });
  if (level === "error") console.error(line);
  else console.warn(line);
};

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
    const content = body.signed(encoder.encode(`${message.id}.${timestamp}.`));
    Object.assign(headers, await signatureHeaders(secret, message.id, timestamp, body.bytes, content));
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
async function record(inv: Invocation, message: DeliveryMessage, attempt: number, at: Date, result: AttemptResult, outcome: AttemptOutcome): Promise<boolean> {
  for (let tries = 1; ; tries++) {
    try {
      await recordAttempt(inv.db, message.id, attempt, at, result, outcome, inv.writes);
      return true;
    } catch (error) {
      log("error", "webhook attempt not recorded", { delivery_id: message.id, attempt, tries, error: String(error) });
      if (tries >= RECORD_TRIES) return false;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

interface Invocation {
  env: Env;
  config: Config;
  deps: Deps;
  db: Database;
  lanes: Semaphore;
  budget: Semaphore;
  /** The claims and outcomes of this invocation's deliveries, written together (see `StatementGroup`). */
  writes: StatementGroup;
}

/**
 * A claim refused although the delivery is pending: every attempt is claimed. An attempt writes its
 * outcome within its timeout; a claim older than that plus a margin belongs to an invocation that
 * died (or whose D1 write failed), and its outcome will never come.
 */
async function settleExhausted(inv: Invocation, msg: Message<unknown>, message: DeliveryMessage, claim: { attempts: number; updatedAt: Date }) {
  const lostAfterMs = inv.config.webhookTimeoutMs + 30_000;
  const age = inv.deps.now().getTime() - claim.updatedAt.getTime();
  if (age < lostAfterMs) {
    // Another copy may still be on its last attempt: look again once it must have written.
    msg.retry({ delaySeconds: Math.ceil((lostAfterMs - age) / 1000) });
    return;
  }
  if (await failPending(inv.db, message.id, inv.deps.now(), "outcome_not_recorded")) {
    logFailure(message, claim.attempts, "the last attempt's outcome was never recorded");
  }
  msg.ack();
}

/** One delivery, start to end: claims, attempts and their records, the pauses between them, and the ack. */
async function deliver(inv: Invocation, msg: Message<unknown>, message: DeliveryMessage): Promise<void> {
  const { env, config, deps, db } = inv;
  let claim = await claimAttempt(db, message, deps.now(), inv.writes);
  if (claim.kind === "settled" || claim.kind === "gone") return msg.ack();
  if (claim.kind === "exhausted") return settleExhausted(inv, msg, message, claim);

  const releaseBytes = await inv.budget.acquire(PREFIX_ROOM + message.bodyBytes);
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
        if (secret === undefined) secret = await openSecret(config.webhookEncryptionKey, message.id, message.secret!);
        // Its outcome is written next: neighbours' writes wait for it (briefly) to share the round trip.
        const sent = await post(deps, config, message, body, secret, at).finally(inv.writes.hold());
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
      if (!(await record(inv, message, attempt, at, result, outcome))) {
        // The attempt happened but is not written. The redelivery claims the next attempt (the count
        // in D1 includes this one) or, after the last, settles the delivery `outcome_not_recorded`.
        msg.retry({ delaySeconds: 1 });
        return;
      }
      if (outcome !== "retry") {
        if (outcome === "failed") logFailure(message, attempt, reason, result);
        msg.ack();
        return;
      }
      // The pause counts from the end of the attempt: the write above is part of it, not added to it.
      const pauseMs = retryDelaySeconds(attempt, retryAfter, at) * 1000 - (Date.now() - ended);
      if (pauseMs > 0) await deps.sleep(pauseMs);
      claim = await claimAttempt(db, message, deps.now(), inv.writes);
      if (claim.kind === "settled" || claim.kind === "gone") return msg.ack();
      if (claim.kind === "exhausted") return settleExhausted(inv, msg, message, claim);
    }
  } finally {
    releaseBytes();
  }
}

export async function deliverWebhooks(batch: MessageBatch<unknown>, scope: Scope, hooks: ConsumerHooks = {}): Promise<void> {
  const inv: Invocation = {
    env: scope.env,
    config: scope.config,
    deps: scope.deps,
    db: scope.db,
    lanes: hooks.lanes ?? new Semaphore(DELIVERY_LANES),
    budget: hooks.budget ?? new Semaphore(BODY_BUDGET_BYTES),
    writes: hooks.writes ?? new StatementGroup(scope.db, WRITE_WINDOW_MS),
  };
  await Promise.all(
    batch.messages.map(async (msg) => {
      const parsed = deliveryMessageSchema.safeParse(msg.body);
      if (!parsed.success) {
        log("error", "unreadable webhook message dropped", { message_id: msg.id, issues: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`) });
        return msg.ack();
      }
      const message = parsed.data;
      // A delivery keeps its lane from its first attempt to its last, pauses included: the 5 s
      // between attempts never depends on a neighbour giving a connection back.
      const release = await inv.lanes.acquire();
      try {
        await deliver(inv, msg, message);
      } catch (error) {
        // Only D1 failing gets here (a claim). The redelivery resumes from D1's attempt count.
        log("error", "webhook delivery interrupted", { delivery_id: message.id, message_id: msg.id, queue_attempts: msg.attempts, error: String(error) });
        msg.retry({ delaySeconds: 1 });
      } finally {
        release();
      }
    }),
  );
}
