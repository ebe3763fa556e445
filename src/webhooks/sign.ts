/**
 * The signatures of a delivery, in Web Crypto only so the same code runs in the Worker, in Node ≥ 20
 * and in browsers (receivers import it through `verify.ts`).
 *
 * - `X-Service-Webhook-Signature: v1,<lowercase hex HMAC-SHA256(secret, id.timestamp.body)>` (the spec),
 *   keyed with the UTF-8 bytes of the secret.
 * - `webhook-signature: v1,<base64 of the same HMAC>` (Standard Webhooks). Standard Webhooks libraries
 *   take a `whsec_<base64 key>` secret and key the HMAC with the decoded bytes; a secret sent in that
 *   form is used the same way here, so those libraries verify with the very secret the caller sent.
 */
import { fromBase64, toBase64, toHex } from "../platform/encoding";

const encoder = new TextEncoder();

export type RawBody = string | Uint8Array | ArrayBuffer;

const bytesOf = (body: RawBody): Uint8Array =>
  typeof body === "string" ? encoder.encode(body) : body instanceof Uint8Array ? body : new Uint8Array(body);

function base64ToBytes(value: string): Uint8Array | null {
  try {
    return fromBase64(value);
  } catch {
    return null;
  }
}

/** The HMAC key bytes of a secret: `whsec_<base64>` is decoded as Standard Webhooks does; anything else is UTF-8. */
export function keyBytes(secret: string): Uint8Array {
  if (secret.startsWith("whsec_")) {
    const decoded = base64ToBytes(secret.slice("whsec_".length));
    if (decoded && decoded.length > 0) return decoded;
  }
  return encoder.encode(secret);
}

/** The signed content `id.timestamp.body`, the raw body bytes untouched. */
export function signedContent(id: string, timestamp: number | string, body: RawBody): Uint8Array {
  const prefix = encoder.encode(`${id}.${timestamp}.`);
  const raw = bytesOf(body);
  const content = new Uint8Array(prefix.length + raw.length);
  content.set(prefix, 0);
  content.set(raw, prefix.length);
  return content;
}

async function hmac(key: Uint8Array, content: Uint8Array): Promise<Uint8Array> {
  const cryptoKey = await crypto.subtle.importKey(
    "raw",
    key as Uint8Array<ArrayBuffer>,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return new Uint8Array(await crypto.subtle.sign("HMAC", cryptoKey, content as Uint8Array<ArrayBuffer>));
}

/** HMAC-SHA256 over `id.timestamp.body`, with the raw body bytes untouched. */
export async function signatureBytes(
  key: Uint8Array,
  id: string,
  timestamp: number | string,
  body: RawBody,
): Promise<Uint8Array> {
  return hmac(key, signedContent(id, timestamp, body));
}

/**
 * The signature headers of one attempt. `content`, when given, is `id.timestamp.body` already laid
 * out (the consumer keeps room for the prefix before a large body, so signing copies nothing).
 */
export async function signatureHeaders(
  secret: string,
  id: string,
  timestamp: number,
  body: RawBody,
  content?: Uint8Array,
): Promise<Record<string, string>> {
  const signed = content ?? signedContent(id, timestamp, body);
  const service = await hmac(encoder.encode(secret), signed);
  const standard = secret.startsWith("whsec_") ? await hmac(keyBytes(secret), signed) : service;
  return {
    "X-Request-Id": id,
    "X-Service-Webhook-Timestamp": String(timestamp),
    "X-Service-Webhook-Signature": `v1,${toHex(service)}`,
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": `v1,${toBase64(standard)}`,
  };
}
