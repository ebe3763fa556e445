import { openSecret } from "../secret-box";
import { signatureHeaders } from "../sign";
import { claimAttempt } from "../store";
import type { DeliveryMessage } from "../message";
import { MAX_ATTEMPTS } from "../policy";
import { type DeliveryContext, type DeliveryInProgress, HeldBody, PREFIX_ROOM } from "./context";

/** Why a claimed attempt could not be sent; recorded as its `error`. */
export type UnsendableError = "body_missing" | "body_unavailable" | "secret_unreadable";

/** The first step of an attempt: its claim in D1, and its request laid out (`signedAt` signs it as it is sent). */
export type Prepared =
  /** Attempt `attempt` is this lane's to send, once. */
  | {
      kind: "ready";
      attempt: number;
      final: boolean;
      /** Its claim's time; the send's, once signed (`signedAt`). */
      at: Date;
      url: string;
      body: Uint8Array;
    }
  /** Attempt `attempt` is claimed but has nothing to send: it is recorded with `error`. */
  | { kind: "unsendable"; attempt: number; at: Date; error: UnsendableError; reason: string; final: boolean }
  /** Nothing to do: delivered or failed already (a duplicate, a redelivery), or gone with its project. */
  | { kind: "settled" }
  /** Pending, but every attempt is claimed: another copy is on the last one, or it died before recording. */
  | { kind: "exhausted"; attempts: number; updatedAt: Date };

class BodyMissing extends Error {}

const encoder = new TextEncoder();

async function loadBody(env: Env, message: DeliveryMessage): Promise<HeldBody> {
  if ("inline" in message.body) {
    const bytes = encoder.encode(message.body.inline);
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

/**
 * Claims the delivery's next attempt (D1 counts it before anything is sent, so a lane that dies and
 * resumes never makes a fourth), then lays out its request: the body read once into the budget, the
 * secret opened once. Throws only when D1 refuses the claim (nothing was sent; D1's count is kept).
 */
export async function prepare(ctx: DeliveryContext, delivery: DeliveryInProgress): Promise<Prepared> {
  const { env, config, deps } = ctx;
  const { message } = delivery;
  const at = deps.now();
  await ctx.findLog(message);
  const log = ctx.log(message);
  const claim = await claimAttempt(log.db, message, at, log.writes, log.db !== ctx.db);
  if (claim.kind === "settled" || claim.kind === "gone") return { kind: "settled" };
  if (claim.kind === "exhausted") return claim;
  const { attempt } = claim;
  const final = attempt >= MAX_ATTEMPTS;
  try {
    await delivery.reserve(ctx.budget);
    delivery.body ??= await loadBody(env, message);
    if (delivery.secret === undefined)
      delivery.secret = await openSecret(
        config.webhookEncryptionKey,
        message.id,
        message.secret!,
        config.previous.webhookEncryptionKey,
      );
  } catch (error) {
    if (error instanceof BodyMissing)
      return { kind: "unsendable", attempt, at, error: "body_missing", reason: "stored body missing", final: true };
    if (delivery.secret === undefined && error instanceof Error && error.name === "OperationError") {
      return {
        kind: "unsendable",
        attempt,
        at,
        error: "secret_unreadable",
        reason: "secret could not be decrypted (WEBHOOK_ENCRYPTION_KEY changed?)",
        final: true,
      };
    }
    // Storage hiccup: another attempt may read it; the last one must not leave the record pending.
    return {
      kind: "unsendable",
      attempt,
      at,
      error: "body_unavailable",
      reason: `stored body unreadable: ${String(error)}`,
      final,
    };
  }
  return { kind: "ready", attempt, final, at, url: message.endpoint, body: delivery.body.bytes };
}

type Ready = Extract<Prepared, { kind: "ready" }>;

/** A ready attempt's request with its headers, signed for the moment it is sent. */
export type SignedAttempt = Ready & { headers: Record<string, string> };

/**
 * The attempt's request signed for `at`, the moment it is sent: its recorded start and its signature's
 * timestamp (after its claim, or after it waited for its lane's slot).
 */
export async function signedAt(delivery: DeliveryInProgress, ready: Ready, at: Date): Promise<SignedAttempt> {
  const { message } = delivery;
  const body = delivery.body!;
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "User-Agent": "edge-gateway-webhooks/1",
  };
  if (typeof delivery.secret === "string") {
    const timestamp = Math.floor(at.getTime() / 1000);
    // The message's id, not the record's: a resend carries its original's, with this attempt's timestamp.
    const id = message.messageId ?? message.id;
    const content = body.signed(encoder.encode(`${id}.${timestamp}.`));
    Object.assign(headers, await signatureHeaders(delivery.secret, id, timestamp, body.bytes, content));
  }
  return { ...ready, at, headers };
}
