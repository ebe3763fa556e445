import { inArray, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { webhookAttempts, webhookDeliveries, type DeliveryStatus } from "../db/schema";
import { isTimeout } from "../platform/http";
import type { Scope } from "../platform/scope";
import type { DeliveryMessage } from "./enqueue";
import { classifyStatus, MAX_ATTEMPTS, type AttemptOutcome, retryDelaySeconds } from "./policy";
import { openSecret } from "./secret-box";
import { signatureHeaders } from "./sign";

/** Writes of an attempt's outcome tried before the message is handed back to the queue. */
const RECORD_TRIES = 3;

interface AttemptResult {
  outcome: AttemptOutcome;
  retryAfter: string | null;
  durationMs: number;
}

function isDeliveryMessage(value: unknown): value is DeliveryMessage {
  if (typeof value !== "object" || value === null) return false;
  const m = value as Partial<DeliveryMessage>;
  return m.v === 1 && typeof m.id === "string" && typeof m.endpoint === "string" && typeof m.projectId === "string" && typeof m.body === "object";
}

async function post({ deps, config }: Scope, message: DeliveryMessage, body: string, secret: string | null, at: Date): Promise<AttemptResult> {
  const headers: Record<string, string> = { "Content-Type": "application/json", "User-Agent": "edge-gateway-webhooks/1" };
  if (secret !== null) Object.assign(headers, await signatureHeaders(secret, message.id, Math.floor(at.getTime() / 1000), body));
  const started = Date.now();
  try {
    const response = await deps.outbound.fetch(
      new Request(message.endpoint, {
        method: "POST",
        headers,
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(config.webhookTimeoutMs),
      }),
    );
    // The receiver's body is not used; release the connection.
    await response.body?.cancel().catch(() => undefined);
    return { outcome: classifyStatus(response.status), retryAfter: response.headers.get("Retry-After"), durationMs: Date.now() - started };
  } catch (error) {
    return { outcome: { kind: "retry", error: isTimeout(error) ? "timeout" : "connection_failed" }, retryAfter: null, durationMs: Date.now() - started };
  }
}

/** What an attempt leaves to record: the delivery's new state and, unless it was settled before, the attempt. */
interface Settlement {
  msg: Message<unknown>;
  message: DeliveryMessage;
  at: Date;
  status: DeliveryStatus;
  result: { statusCode?: number; error?: string; durationMs: number };
  /** Why a delivery failed, for the alerting log line. */
  why?: string;
  /** After the write: acknowledge, or retry after this many seconds. */
  retryAfterSeconds?: number;
}

/** The two statements that record one attempt and the delivery's new state; they create the record if enqueue could not. */
function recordStatements(db: Database, { message, msg, at, status, result }: Settlement) {
  const attempt = msg.attempts;
  const final = status !== "pending";
  const state = {
    status,
    attemptCount: attempt,
    lastStatusCode: result.statusCode ?? null,
    lastError: result.error ?? null,
    updatedAt: at,
    completedAt: final ? at : null,
  };
  return [
    db
      .insert(webhookDeliveries)
      .values({
        id: message.id,
        projectId: message.projectId,
        runId: message.runId,
        endpoint: message.endpoint,
        signed: message.secret !== null,
        bodyBytes: message.bodyBytes,
        createdAt: new Date(message.createdAt),
        ...state,
      })
      .onConflictDoUpdate({ target: webhookDeliveries.id, set: { ...state, attemptCount: sql`max(${webhookDeliveries.attemptCount}, ${attempt})` } }),
    db
      .insert(webhookAttempts)
      .values({ deliveryId: message.id, attempt, at, statusCode: result.statusCode ?? null, error: result.error ?? null, durationMs: result.durationMs })
      .onConflictDoNothing(),
  ] as const;
}

function logFailure(message: DeliveryMessage, attempt: number, why: string, result: { statusCode?: number; error?: string }) {
  // One line per failed delivery, for alerting; never the secret or the body.
  console.error(
    JSON.stringify({
      level: "error",
      msg: "webhook delivery failed",
      reason: why,
      delivery_id: message.id,
      run_id: message.runId,
      project_id: message.projectId,
      endpoint_host: new URL(message.endpoint).host,
      attempts: attempt,
      last_status_code: result.statusCode ?? null,
      last_error: result.error ?? null,
    }),
  );
}

/**
 * One message's attempt: loads its body and secret, POSTs, and says what to record and whether to
 * retry; `null` when the message went back to the queue with nothing to record (its stored body
 * could not be read this time).
 */
async function attempt(scope: Scope, msg: Message<unknown>, message: DeliveryMessage): Promise<Settlement | null> {
  const { env, config } = scope;
  const at = scope.deps.now();
  const settle = (status: DeliveryStatus, result: Settlement["result"], why?: string, retryAfterSeconds?: number): Settlement => ({
    msg,
    message,
    at,
    status,
    result,
    why,
    retryAfterSeconds,
  });
  if (msg.attempts > MAX_ATTEMPTS) return settle("failed", { error: "attempts_exhausted", durationMs: 0 }, "attempts exhausted");

  let body: string;
  let secret: string | null = null;
  try {
    if ("inline" in message.body) {
      body = message.body.inline;
    } else {
      const object = await env.WEBHOOK_BODIES.get(message.body.r2);
      if (!object) return settle("failed", { error: "body_missing", durationMs: 0 }, "stored body missing");
      body = await object.text();
    }
    if (message.secret) secret = await openSecret(config.webhookEncryptionKey, message.id, message.secret);
  } catch (error) {
    if (message.secret && secret === null && error instanceof Error && error.name === "OperationError") {
      return settle("failed", { error: "secret_unreadable", durationMs: 0 }, "secret could not be decrypted (WEBHOOK_ENCRYPTION_KEY changed?)");
    }
    // Storage hiccup: try again later within the attempt budget; past it, the record must not stay pending.
    if (msg.attempts >= MAX_ATTEMPTS) return settle("failed", { error: "body_unavailable", durationMs: 0 }, `stored body unreadable: ${String(error)}`);
    msg.retry({ delaySeconds: retryDelaySeconds(msg.attempts, null, at) });
    return null;
  }

  const { outcome, retryAfter, durationMs } = await post(scope, message, body, secret, at);
  const result = { ...outcome, durationMs };
  if (outcome.kind === "delivered") return settle("delivered", result);
  if (outcome.kind === "permanent") return settle("failed", result, "permanent failure");
  if (msg.attempts >= MAX_ATTEMPTS) return settle("failed", result, "attempts exhausted");
  return settle("pending", result, undefined, retryDelaySeconds(msg.attempts, retryAfter, at));
}

/** The ids among `ids` whose delivery is settled already (the queue delivers at least once): one read per 100. */
async function settledIds(db: Database, ids: string[]): Promise<Set<string>> {
  const settled = new Set<string>();
  // D1 binds at most 100 parameters per statement.
  for (let i = 0; i < ids.length; i += 100) {
    const rows = await db
      .select({ id: webhookDeliveries.id, status: webhookDeliveries.status })
      .from(webhookDeliveries)
      .where(inArray(webhookDeliveries.id, ids.slice(i, i + 100)));
    for (const row of rows) if (row.status !== "pending") settled.add(row.id);
  }
  return settled;
}

/**
 * Writes every settlement of the batch in one D1 batch. A settled delivery must not stay `pending`
 * because D1 hiccuped: the write is tried a few times before the caller hands the messages back.
 */
async function recordAll(db: Database, settlements: Settlement[]): Promise<void> {
  if (settlements.length === 0) return;
  const [first, ...rest] = settlements.flatMap((s) => recordStatements(db, s));
  for (let tries = 1; ; tries++) {
    try {
      await db.batch([first!, ...rest]);
      return;
    } catch (error) {
      console.error(JSON.stringify({ level: "error", msg: "webhook attempts not recorded", deliveries: settlements.length, tries, error: String(error) }));
      if (tries >= RECORD_TRIES) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50 * tries));
    }
  }
}

/** Only D1 failing gets here. Another attempt may fare better; the last one says so in the log. */
function crashed(msg: Message<unknown>, error: unknown) {
  const last = msg.attempts >= MAX_ATTEMPTS;
  console.error(
    JSON.stringify({ level: "error", msg: last ? "webhook delivery failed" : "webhook delivery crashed", reason: "internal error", message_id: msg.id, attempts: msg.attempts, error: String(error) }),
  );
  if (last) msg.ack();
  else msg.retry({ delaySeconds: 1 });
}

/**
 * The `webhook-deliveries` consumer: one D1 read for the whole batch, every POST at once, one D1
 * batch for every outcome, then each message acknowledged or retried on its own.
 */
export async function deliverWebhooks(batch: MessageBatch<unknown>, scope: Scope): Promise<void> {
  const { env, db } = scope;
  const pending: { msg: Message<unknown>; message: DeliveryMessage }[] = [];
  for (const msg of batch.messages) {
    if (isDeliveryMessage(msg.body)) {
      pending.push({ msg, message: msg.body });
    } else {
      console.error(JSON.stringify({ level: "error", msg: "unreadable webhook message dropped", message_id: msg.id }));
      msg.ack();
    }
  }
  let settled: Set<string>;
  try {
    settled = await settledIds(db, pending.map((p) => p.message.id));
  } catch (error) {
    for (const { msg } of pending) crashed(msg, error);
    return;
  }
  const settlements: Settlement[] = [];
  await Promise.all(
    pending.map(async ({ msg, message }) => {
      // A message seen again after its delivery was settled is not sent twice.
      if (settled.has(message.id)) return msg.ack();
      try {
        const settlement = await attempt(scope, msg, message);
        if (settlement) settlements.push(settlement);
      } catch (error) {
        crashed(msg, error);
      }
    }),
  );
  try {
    await recordAll(db, settlements);
  } catch (error) {
    for (const { msg } of settlements) crashed(msg, error);
    return;
  }
  for (const { msg, message, status, result, why, retryAfterSeconds } of settlements) {
    if (status === "failed") logFailure(message, msg.attempts, why ?? "failed", result);
    if (status !== "pending" && "r2" in message.body) await env.WEBHOOK_BODIES.delete(message.body.r2).catch(() => undefined);
    if (retryAfterSeconds === undefined) msg.ack();
    else msg.retry({ delaySeconds: retryAfterSeconds });
  }
}
