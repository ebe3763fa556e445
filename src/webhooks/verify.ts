import { toHex } from "../platform/encoding";
import { type RawBody, signatureBytes } from "./sign";

/**
 * For receivers: checks a delivery's `X-Service-Webhook-Signature`. Import it as
 * `import { verifyWebhook } from "edge-gateway/verify"` (Node ≥ 20, Workers, Deno, browsers).
 * Pass the body exactly as received: parsing and re-serialising JSON changes its bytes.
 */
export type WebhookErrorCode = "missing_header" | "malformed_header" | "stale_timestamp" | "signature_mismatch";

export class WebhookVerificationError extends Error {
  constructor(
    readonly code: WebhookErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}

export interface VerifyOptions {
  /** How far the timestamp may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The current time, for tests (default `Date.now()`). */
  now?: Date;
}

export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  const lower = name.toLowerCase();
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === lower) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

function constantTimeEqual(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return diff === 0;
}

/** Resolves with the delivery id and timestamp when the signature is valid; throws `WebhookVerificationError` otherwise. */
export async function verifyWebhook(
  secret: string,
  headers: HeaderSource,
  rawBody: RawBody,
  options: VerifyOptions = {},
): Promise<{ id: string; timestamp: number }> {
  const id = header(headers, "X-Request-Id");
  const timestampText = header(headers, "X-Service-Webhook-Timestamp");
  const signature = header(headers, "X-Service-Webhook-Signature");
  for (const [name, value] of [["X-Request-Id", id], ["X-Service-Webhook-Timestamp", timestampText], ["X-Service-Webhook-Signature", signature]]) {
    if (!value) throw new WebhookVerificationError("missing_header", `The ${name} header is missing.`);
  }
  if (!/^\d{1,12}$/.test(timestampText!)) {
    throw new WebhookVerificationError("malformed_header", "X-Service-Webhook-Timestamp is not Unix seconds.");
  }
  const timestamp = Number(timestampText);
  const tolerance = options.toleranceSeconds ?? 300;
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  if (Math.abs(now - timestamp) > tolerance) {
    throw new WebhookVerificationError(
      "stale_timestamp",
      `The timestamp is ${now - timestamp} s from now, more than the ${tolerance} s tolerance: a replay, or a clock out of sync.`,
    );
  }
  const expected = toHex(await signatureBytes(new TextEncoder().encode(secret), id!, timestamp, rawBody));
  // Several space-separated signatures may be sent during a secret rotation; any one may match.
  const candidates = signature!.split(" ").filter((part) => part.startsWith("v1,")).map((part) => part.slice(3));
  if (candidates.length === 0) throw new WebhookVerificationError("malformed_header", "X-Service-Webhook-Signature has no `v1,` signature.");
  let matched = false;
  for (const candidate of candidates) matched = constantTimeEqual(candidate.toLowerCase(), expected) || matched;
  if (!matched) {
    throw new WebhookVerificationError(
      "signature_mismatch",
      "The signature does not match: wrong secret, or the body was changed (verify the raw bytes as received, not re-serialised JSON).",
    );
  }
  return { id: id!, timestamp };
}
