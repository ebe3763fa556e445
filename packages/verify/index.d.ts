/** Why a delivery was refused. */
export type WebhookErrorCode = "missing_header" | "malformed_header" | "stale_timestamp" | "signature_mismatch";

export declare class WebhookVerificationError extends Error {
  readonly code: WebhookErrorCode;
  constructor(code: WebhookErrorCode, message: string);
}

export interface VerifyOptions {
  /** How far the timestamp may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The current time, for tests (default: now). */
  now?: Date;
}

/** `Headers` (fetch, Workers) or a plain object such as Node's `req.headers` (any key case). */
export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

/** The body exactly as received. */
export type RawBody = string | Uint8Array | ArrayBuffer;

/**
 * Resolves with the delivery id (`X-Request-Id`, the same on every attempt: de-duplicate on it) and
 * the attempt's timestamp when `X-Service-Webhook-Signature` is valid for `secret`; rejects with a
 * `WebhookVerificationError` otherwise.
 */
export declare function verifyWebhook(
  secret: string,
  headers: HeaderSource,
  rawBody: RawBody,
  options?: VerifyOptions,
): Promise<{ id: string; timestamp: number }>;
