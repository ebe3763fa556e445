import { eq } from "drizzle-orm";
import { webhookDeliveries } from "../db/schema";
import { newId } from "../platform/ids";
import { idInShardOf } from "../platform/shards";
import { DeliveryLogFullError, logDbOf } from "./log";
import type { Scope } from "../platform/scope";
import { INLINE_MESSAGE_MAX_BYTES } from "./policy";
import { pendingInsert, type PendingRow } from "./store";
import type { DeliveryMessage } from "./message";
import { handMessageToLane } from "./hand-off";
import { type SealedSecret, sealSecret } from "./secret-box";
import { logError } from "../platform/log";
import { retry } from "../platform/retry";

/** Where and for whom a delivery goes: the run it copies and the receiver's endpoint (and its secret). */
export interface DeliveryAddress {
  projectId: string;
  runId: string;
  /** The run's app: usage figures per app count its deliveries by it. */
  appName?: string;
  endpoint: string;
  secret: string | undefined;
}

export interface DeliveryRequest extends DeliveryAddress {
  /** The exact bytes returned to the caller. */
  body: string;
}

/** A delivery whose `pending` row exists: what `writePendingDelivery` returns and `handToLane` takes. */
export interface PendingDelivery extends DeliveryAddress {
  id: string;
  /** What receivers see as the message's id: `id`, or the original's on a resend. */
  messageId: string;
  createdAt: Date;
  /** Whether the row was written; if not, the consumer's first claim writes it. */
  recorded: boolean;
  sealed: SealedSecret | null;
}

export const HAND_TO_LANE_TRIES = 3;
export const bodyKey = (deliveryId: string) => `webhook-bodies/${deliveryId}`;

const encoder = new TextEncoder();

/**
 * A delivery ready to be written `pending`: its ids and sealed secret, and its row. Nothing is written
 * yet: `writePendingDelivery` writes it alone, an async run's end writes it in the batch that ends the run.
 */
export async function preparePending(
  { config, deps }: Pick<Scope, "config" | "deps">,
  address: DeliveryAddress,
  options: { resentFrom?: { id: string; messageId: string } } = {},
): Promise<{ pending: PendingDelivery; row: PendingRow }> {
  const createdAt = deps.now();
  // In its run's shard: the delivery log's object of a run's deliveries is found from the run id (platform/shards.ts).
  const id = idInShardOf(newId("whd", createdAt.getTime()), address.runId);
  // A resend is the same message again (Standard Webhooks: the id stays when a message is resent), so
  // receivers that de-duplicate by `webhook-id` recognise it; its timestamp and signature are fresh.
  const messageId = options.resentFrom?.messageId ?? id;
  const sealed =
    address.secret === undefined ? null : await sealSecret(config.webhookEncryptionKey, id, address.secret);
  const row: PendingRow = {
    id,
    projectId: address.projectId,
    runId: address.runId,
    appName: address.appName ?? null,
    endpoint: address.endpoint,
    signed: sealed !== null,
    bodyBytes: 0,
    status: "pending",
    createdAt,
    updatedAt: createdAt,
    sealedSecret: sealed === null ? null : JSON.stringify(sealed),
    resentFrom: options.resentFrom?.id ?? null,
    messageId,
  };
  return { pending: { ...address, id, messageId, createdAt, recorded: true, sealed }, row };
}

const insertPending = pendingInsert();

/**
 * Writes the delivery's `pending` row, with its sealed secret, before the run calls its app:
 * whatever happens to the run afterwards (the caller hangs up, the invocation is cut short), the
 * delivery is accounted for, and the sweeper settles it if nothing else does. One statement.
 */
export async function writePendingDelivery(
  scope: Scope,
  address: DeliveryAddress,
  options: { resentFrom?: { id: string; messageId: string } } = {},
): Promise<PendingDelivery> {
  return writePending(scope, await preparePending(scope, address, options));
}

/** Writes a prepared delivery's `pending` row (`preparePending`); when its store refuses, the first claim writes it from the message. */
export async function writePending(
  scope: Pick<Scope, "db" | "env" | "config">,
  { pending, row }: { pending: PendingDelivery; row: PendingRow },
): Promise<PendingDelivery> {
  return (await recordPending(scope, row)) ? pending : { ...pending, recorded: false };
}

/**
 * Writes a delivery's `pending` row in its log (webhooks/log.ts `logDbOf`); `false` when the store refused
 * it (logged): the consumer's first claim writes it from the message. A log past its bound throws
 * (`DeliveryLogFullError`): no delivery is made that its log cannot keep.
 */
export async function recordPending(scope: Pick<Scope, "db" | "env" | "config">, row: PendingRow): Promise<boolean> {
  try {
    await insertPending(logDbOf(scope, row.projectId as string, row.id as string, { grows: true }), row).run();
    return true;
  } catch (error) {
    if (error instanceof DeliveryLogFullError) throw error;
    logError("webhook delivery record not written before the run", {
      delivery_id: row.id as string,
      run_id: row.runId as string,
      project_id: row.projectId as string,
      error,
    });
    return false;
  }
}

/** A delivery whose row says `pending`, to be handed to its lane again (when the first time was lost). */
export function pendingOf(row: typeof webhookDeliveries.$inferSelect): PendingDelivery {
  return {
    id: row.id,
    messageId: row.messageId ?? row.id,
    projectId: row.projectId,
    runId: row.runId,
    appName: row.appName ?? undefined,
    endpoint: row.endpoint,
    secret: undefined,
    createdAt: row.createdAt,
    recorded: true,
    sealed: row.sealedSecret === null ? null : (JSON.parse(row.sealedSecret) as SealedSecret),
  };
}

/** The queue message of `pending` with `body`: inline when the serialised message stays small, else by R2 reference. */
async function messageOf(
  env: Env,
  pending: PendingDelivery,
  body: string,
  bodyBytes: number,
): Promise<DeliveryMessage> {
  const base = {
    v: 1 as const,
    id: pending.id,
    messageId: pending.messageId,
    projectId: pending.projectId,
    runId: pending.runId,
    endpoint: pending.endpoint,
    createdAt: pending.createdAt.getTime(),
    bodyBytes,
    secret: pending.sealed,
  };
  // The limit is on what the queue carries: JSON escaping (quotes, control characters, non-ASCII
  // as written by the app) can make the message far larger than the body.
  if (bodyBytes <= INLINE_MESSAGE_MAX_BYTES) {
    const message: DeliveryMessage = { ...base, body: { inline: body } };
    if (encoder.encode(JSON.stringify(message)).byteLength <= INLINE_MESSAGE_MAX_BYTES) return message;
  }
  await env.WEBHOOK_BODIES.put(bodyKey(pending.id), body, { httpMetadata: { contentType: "application/json" } });
  return { ...base, body: { r2: bodyKey(pending.id) } };
}

/**
 * Hands a delivery whose row exists to its lane: at once, or through the queue when the lane cannot
 * take it (`handMessageToLane`). Runs in `waitUntil` after the caller has its answer, so it never
 * throws: a failed try is retried, and if neither the lane nor the queue takes it the row says `failed`
 * with the reason, so nothing is lost silently.
 */
export async function handToLane(scope: Scope, pending: PendingDelivery, body: string): Promise<string> {
  const { env } = scope;
  const { id } = pending;
  const bodyBytes = encoder.encode(body).byteLength;
  const facts = { delivery_id: id, run_id: pending.runId, project_id: pending.projectId };
  let stored = false;
  try {
    await retry(
      async () => {
        const message = await messageOf(env, pending, body, bodyBytes);
        stored = "r2" in message.body;
        await handMessageToLane(env, message);
      },
      { tries: HAND_TO_LANE_TRIES, sleep: scope.deps.sleep, pauseMs: (attempt) => 100 * 2 ** attempt },
    );
    return id;
  } catch (error) {
    logError("webhook delivery could not be handed to its lane or the queue", {
      ...facts,
      endpoint_host: new URL(pending.endpoint).host,
      error,
    });
  }
  if (stored) await env.WEBHOOK_BODIES.delete(bodyKey(id)).catch(() => undefined);
  await settleUnsent(scope, pending, "enqueue_failed");
  return id;
}

/** Ends a delivery that never reached the queue as `failed` with `reason`, writing the row if the run path could not. */
export async function settleUnsent(scope: Scope, pending: PendingDelivery, reason: string): Promise<void> {
  const at = scope.deps.now();
  const db = logDbOf(scope, pending.projectId, pending.id);
  try {
    if (pending.recorded) {
      await db
        .update(webhookDeliveries)
        .set({ status: "failed", lastError: reason, updatedAt: at, completedAt: at })
        .where(eq(webhookDeliveries.id, pending.id));
    } else {
      await db.insert(webhookDeliveries).values({
        id: pending.id,
        messageId: pending.messageId,
        projectId: pending.projectId,
        runId: pending.runId,
        endpoint: pending.endpoint,
        signed: pending.sealed !== null,
        bodyBytes: 0,
        status: "failed",
        lastError: reason,
        createdAt: pending.createdAt,
        updatedAt: at,
        completedAt: at,
      });
    }
  } catch (error) {
    // The sweeper settles the row (if any) once it is old enough.
    logError("webhook delivery failure not recorded", {
      delivery_id: pending.id,
      run_id: pending.runId,
      project_id: pending.projectId,
      reason,
      error,
    });
  }
}

/** What a run's delivery carries once the run has ended: the body, or why it never will (the run was cut short). */
export type DeliveryBody = { text: string } | { unsent: string };

/**
 * A synchronous run's delivery, in one call from the run: the `pending` row is written before this
 * returns (the run calls its app after it, so a caller who hangs up never leaves the delivery
 * unaccounted for), and the body is handed to its lane once `body` resolves, in `waitUntil` (spec 6:
 * the delivery does not block the response); a run that did not finish settles its row `failed`.
 */
export async function handRunCopyToLane(
  scope: Scope,
  address: DeliveryAddress,
  body: Promise<DeliveryBody>,
): Promise<void> {
  const pending = await writePendingDelivery(scope, address);
  const handed = body.then(
    async (copy) => {
      if ("text" in copy) await handToLane(scope, pending, copy.text);
      else await settleUnsent(scope, pending, copy.unsent);
    },
    () => settleUnsent(scope, pending, "run_interrupted"),
  );
  scope.ctx.waitUntil(
    handed.then(
      () => undefined,
      () => undefined,
    ),
  );
}

/** Writes a delivery's row and hands it to its lane: `writePendingDelivery` then `handToLane`, for a body known already. */
export async function handNewDeliveryToLane(scope: Scope, request: DeliveryRequest): Promise<string> {
  const pending = await writePendingDelivery(scope, request);
  return handToLane(scope, pending, request.body);
}
