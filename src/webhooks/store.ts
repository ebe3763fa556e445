import { and, eq, lt, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { type AttemptOutcome, webhookAttempts, webhookDeliveries } from "../db/schema";
import type { DeliveryMessage } from "./enqueue";
import { MAX_ATTEMPTS } from "./policy";

/**
 * The D1 statements of a delivery's life. D1 is where the attempt count lives: the queue delivers
 * at least once and may redeliver after a crash, so `msg.attempts` says how often the queue handed
 * the message over, not how often the receiver was called.
 *
 * A first-attempt success costs 3 statements: the `pending` row before the run
 * (`recordPending`), the claim of attempt 1 (`claimAttempt`), the attempt's outcome
 * (`recordAttempt`, one INSERT; a trigger settles the delivery row in the same statement).
 */

export type Claim =
  /** This invocation owns attempt `attempt` (1…3); the receiver may be called once for it. */
  | { kind: "attempt"; attempt: number }
  /** Delivered or failed already (a duplicate message, a redelivery after the outcome was written). */
  | { kind: "settled" }
  /** Pending, but every attempt is claimed: another copy is on the last one, or it died before recording. */
  | { kind: "exhausted"; attempts: number; updatedAt: Date }
  /** No row, and the message cannot create one (its project was deleted). */
  | { kind: "gone" };

/**
 * Claims the next attempt with one conditional write. The row is created here if the run path
 * could not write it (D1 hiccuped at enqueue); the body and sealed secret the message carries are
 * kept on the row for resending.
 */
export async function claimAttempt(db: Database, message: DeliveryMessage, at: Date): Promise<Claim> {
  const inline = "inline" in message.body ? message.body.inline : null;
  const key = "r2" in message.body ? message.body.r2 : null;
  const sealed = message.secret ? JSON.stringify(message.secret) : null;
  const claimed = await db
    .insert(webhookDeliveries)
    .values({
      id: message.id,
      projectId: message.projectId,
      runId: message.runId,
      endpoint: message.endpoint,
      signed: message.secret !== null,
      bodyBytes: message.bodyBytes,
      status: "pending",
      attemptCount: 1,
      createdAt: new Date(message.createdAt),
      updatedAt: at,
      body: inline,
      bodyKey: key,
      sealedSecret: sealed,
    })
    .onConflictDoUpdate({
      target: webhookDeliveries.id,
      set: {
        attemptCount: sql`${webhookDeliveries.attemptCount} + 1`,
        updatedAt: at,
        bodyBytes: message.bodyBytes,
        body: sql`coalesce(${webhookDeliveries.body}, excluded.body)`,
        bodyKey: sql`coalesce(${webhookDeliveries.bodyKey}, excluded.body_key)`,
        sealedSecret: sql`coalesce(${webhookDeliveries.sealedSecret}, excluded.sealed_secret)`,
      },
      setWhere: and(eq(webhookDeliveries.status, "pending"), lt(webhookDeliveries.attemptCount, MAX_ATTEMPTS)),
    })
    .returning({ attempt: webhookDeliveries.attemptCount })
    .catch((error: unknown) => {
      // The project is gone (deleted with its deliveries): nothing to deliver or record.
      if (String(error).includes("FOREIGN KEY")) return "gone" as const;
      throw error;
    });
  if (claimed === "gone") return { kind: "gone" };
  if (claimed.length === 1) return { kind: "attempt", attempt: claimed[0]!.attempt };
  // Refused: the rare path, one read to say why.
  const [row] = await db
    .select({ status: webhookDeliveries.status, attempts: webhookDeliveries.attemptCount, updatedAt: webhookDeliveries.updatedAt })
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.id, message.id));
  if (!row) return { kind: "gone" };
  if (row.status !== "pending") return { kind: "settled" };
  return { kind: "exhausted", attempts: row.attempts, updatedAt: row.updatedAt };
}

export interface AttemptResult {
  statusCode?: number;
  error?: string;
  durationMs: number;
}

/** One INSERT: the attempt, and (by the trigger `webhook_attempt_settles`) the delivery's last outcome and status. */
export async function recordAttempt(db: Database, deliveryId: string, attempt: number, at: Date, result: AttemptResult, outcome: AttemptOutcome) {
  await db
    .insert(webhookAttempts)
    .values({ deliveryId, attempt, at, statusCode: result.statusCode ?? null, error: result.error ?? null, durationMs: result.durationMs, outcome })
    .onConflictDoNothing();
}

/** Settles a delivery still `pending` as failed with `reason` (dead-letter queue, a lost outcome, a cut-short run); null if it was not pending. */
export async function failPending(db: Database, deliveryId: string, at: Date, reason: string): Promise<{ attempts: number } | null> {
  const [row] = await db
    .update(webhookDeliveries)
    .set({ status: "failed", lastError: reason, updatedAt: at, completedAt: at })
    .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.status, "pending")))
    .returning({ attempts: webhookDeliveries.attemptCount });
  return row ?? null;
}
