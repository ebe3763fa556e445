import { eq, sql } from "drizzle-orm";
import { createDb, type Database } from "../db/client";
import { webhookAttempts, webhookDeliveries, type DeliveryStatus } from "../db/schema";
import type { Deps } from "../platform/context";
import { type Config, type Env, getConfig } from "../platform/env";
import type { DeliveryMessage } from "./enqueue";
import { classifyStatus, MAX_ATTEMPTS, type Outcome, retryDelaySeconds } from "./policy";
import { openSecret } from "./secret-box";
import { signatureHeaders } from "./sign";

/** Writes of an attempt's outcome tried before the message is handed back to the queue. */
const RECORD_TRIES = 3;

interface AttemptResult {
  outcome: Outcome;
  retryAfter: string | null;
  durationMs: number;
}

function isDeliveryMessage(value: unknown): value is DeliveryMessage {
  if (typeof value !== "object" || value === null) return false;
  const m = value as Partial<DeliveryMessage>;
  return m.v === 1 && typeof m.id === "string" && typeof m.endpoint === "string" && typeof m.projectId === "string" && typeof m.body === "object";
}

async function post(deps: Deps, config: Config, message: DeliveryMessage, body: string, secret: string | null, at: Date): Promise<AttemptResult> {
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
    const name = error instanceof Error ? error.name : "";
    const kind = name === "TimeoutError" || name === "AbortError" ? "timeout" : "connection_failed";
    return { outcome: { kind: "retry", error: kind }, retryAfter: null, durationMs: Date.now() - started };
  }
}

/** Writes one attempt and the delivery's new state together; creates the record if enqueue could not. */
async function record(
  db: Database,
  message: DeliveryMessage,
  attempt: number,
  at: Date,
  result: { statusCode?: number; error?: string; durationMs: number },
  status: DeliveryStatus,
) {
  const final = status !== "pending";
  const state = {
    status,
    attemptCount: attempt,
    lastStatusCode: result.statusCode ?? null,
    lastError: result.error ?? null,
    updatedAt: at,
    completedAt: final ? at : null,
  };
  await db.batch([
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
  ]);
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

async function deliverOne(msg: Message<unknown>, env: Env, config: Config, db: Database, deps: Deps): Promise<void> {
  const message = msg.body;
  if (!isDeliveryMessage(message)) {
    console.error(JSON.stringify({ level: "error", msg: "unreadable webhook message dropped", message_id: msg.id }));
    msg.ack();
    return;
  }
  const attempt = msg.attempts;
  const at = deps.now();
  const finish = async (status: DeliveryStatus, result: { statusCode?: number; error?: string; durationMs: number }, why?: string) => {
    // A settled delivery must not stay `pending` because D1 hiccuped: try the write again a few times,
    // then let the queue retry the message (the receiver may see the delivery again: same id, de-duplicated).
    for (let tries = 1; ; tries++) {
      try {
        await record(db, message, attempt, at, result, status);
        break;
      } catch (error) {
        console.error(JSON.stringify({ level: "error", msg: "webhook attempt not recorded", delivery_id: message.id, tries, error: String(error) }));
        if (tries >= RECORD_TRIES) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50 * tries));
      }
    }
    if (status === "failed") logFailure(message, attempt, why ?? "failed", result);
    if (status !== "pending" && "r2" in message.body) await env.WEBHOOK_BODIES.delete(message.body.r2).catch(() => undefined);
  };

  // A message seen again after its delivery was settled (the queue delivers at least once) is not sent twice.
  const [existing] = await db.select({ status: webhookDeliveries.status }).from(webhookDeliveries).where(eq(webhookDeliveries.id, message.id)).limit(1);
  if (existing && existing.status !== "pending") {
    msg.ack();
    return;
  }
  if (attempt > MAX_ATTEMPTS) {
    await finish("failed", { error: "attempts_exhausted", durationMs: 0 }, "attempts exhausted");
    msg.ack();
    return;
  }

  let body: string;
  let secret: string | null = null;
  try {
    if ("inline" in message.body) {
      body = message.body.inline;
    } else {
      const object = await env.WEBHOOK_BODIES.get(message.body.r2);
      if (!object) {
        await finish("failed", { error: "body_missing", durationMs: 0 }, "stored body missing");
        msg.ack();
        return;
      }
      body = await object.text();
    }
    if (message.secret) secret = await openSecret(config.webhookEncryptionKey, message.id, message.secret);
  } catch (error) {
    if (message.secret && secret === null && error instanceof Error && error.name === "OperationError") {
      await finish("failed", { error: "secret_unreadable", durationMs: 0 }, "secret could not be decrypted (WEBHOOK_ENCRYPTION_KEY changed?)");
      msg.ack();
      return;
    }
    // Storage hiccup: try again later within the attempt budget; past it, the record must not stay pending.
    if (attempt >= MAX_ATTEMPTS) {
      await finish("failed", { error: "body_unavailable", durationMs: 0 }, `stored body unreadable: ${String(error)}`);
      msg.ack();
    } else {
      msg.retry({ delaySeconds: retryDelaySeconds(attempt, null, at) });
    }
    return;
  }

  const { outcome, retryAfter, durationMs } = await post(deps, config, message, body, secret, at);
  const result = { ...outcome, durationMs };
  if (outcome.kind === "delivered") {
    await finish("delivered", result);
    msg.ack();
  } else if (outcome.kind === "permanent") {
    await finish("failed", result, "permanent failure");
    msg.ack();
  } else if (attempt >= MAX_ATTEMPTS) {
    await finish("failed", result, "attempts exhausted");
    msg.ack();
  } else {
    await finish("pending", result);
    msg.retry({ delaySeconds: retryDelaySeconds(attempt, retryAfter, at) });
  }
}

/** The `webhook-deliveries` consumer: every message of the batch at once, each acked or retried on its own. */
export async function deliverWebhooks(batch: MessageBatch<unknown>, env: Env, _ctx: ExecutionContext, deps: Deps): Promise<void> {
  const config = getConfig(env);
  const db = createDb(env.DB);
  await Promise.all(
    batch.messages.map((msg) =>
      deliverOne(msg, env, config, db, deps).catch((error: unknown) => {
        // Only D1 or R2 failing gets here. Another attempt may fare better; the last one says so in the log.
        const last = msg.attempts >= MAX_ATTEMPTS;
        console.error(
          JSON.stringify({ level: "error", msg: last ? "webhook delivery failed" : "webhook delivery crashed", reason: "internal error", message_id: msg.id, attempts: msg.attempts, error: String(error) }),
        );
        if (last) msg.ack();
        else msg.retry({ delaySeconds: 1 });
      }),
    ),
  );
}
