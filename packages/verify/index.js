// @edge-gateway/verify: checks the signature of an Edge Gateway webhook delivery. Plain ESM JavaScript
// on Web Crypto (Node >= 20, Workers, Deno, Bun, browsers), no dependencies; types in index.d.ts.
//
//   X-Service-Webhook-Signature: v1,<lowercase hex HMAC-SHA256(secret, id + "." + timestamp + "." + body)>
//
// Verify the body exactly as received: parsing and re-serialising JSON changes its bytes.

const encoder = new TextEncoder();

export class WebhookVerificationError extends Error {
  /** @param {import("./index.js").WebhookErrorCode} code */
  constructor(code, message) {
    super(message);
    this.name = "WebhookVerificationError";
    this.code = code;
  }
}

/** A header from a `Headers` object or a plain object with any key case (Node's `req.headers` is lower case). */
function header(headers, name) {
  if (typeof headers?.get === "function") return headers.get(name) ?? undefined;
  const wanted = name.toLowerCase();
  for (const key of Object.keys(headers ?? {})) {
    if (key.toLowerCase() !== wanted) continue;
    const value = headers[key];
    return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

function bodyBytes(rawBody) {
  if (typeof rawBody === "string") return encoder.encode(rawBody);
  if (rawBody instanceof Uint8Array) return rawBody; // a Node Buffer is one too
  if (rawBody instanceof ArrayBuffer) return new Uint8Array(rawBody);
  throw new TypeError("rawBody must be the body as received: a string, Uint8Array/Buffer or ArrayBuffer.");
}

async function expectedSignature(secret, id, timestamp, rawBody) {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const head = encoder.encode(`${id}.${timestamp}.`);
  const body = bodyBytes(rawBody);
  const signed = new Uint8Array(head.length + body.length);
  signed.set(head);
  signed.set(body, head.length);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, signed));
  return Array.from(mac, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** Compares in time that depends only on the lengths, so a forger learns nothing from timing. */
function constantTimeEqual(a, b) {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return diff === 0;
}

/**
 * Resolves with the delivery's id (de-duplicate on it) and timestamp when the signature is valid;
 * rejects with a WebhookVerificationError otherwise. A missing or malformed timestamp is an error,
 * never a skipped staleness check.
 */
export async function verifyWebhook(secret, headers, rawBody, options = {}) {
  if (typeof secret !== "string" || secret.length === 0)
    throw new TypeError("secret must be the non-empty X-Webhook-Secret sent with the run.");
  const id = header(headers, "X-Request-Id");
  const timestampText = header(headers, "X-Service-Webhook-Timestamp");
  const signature = header(headers, "X-Service-Webhook-Signature");
  for (const [name, value] of [
    ["X-Request-Id", id],
    ["X-Service-Webhook-Timestamp", timestampText],
    ["X-Service-Webhook-Signature", signature],
  ]) {
    if (!value) throw new WebhookVerificationError("missing_header", `The ${name} header is missing.`);
  }
  if (!/^\d{1,12}$/.test(timestampText))
    throw new WebhookVerificationError("malformed_header", "X-Service-Webhook-Timestamp is not Unix seconds.");
  const timestamp = Number(timestampText);
  const tolerance = options.toleranceSeconds ?? 300;
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  if (Math.abs(now - timestamp) > tolerance) {
    throw new WebhookVerificationError(
      "stale_timestamp",
      `The timestamp is ${now - timestamp} s from now, more than the ${tolerance} s tolerance: a replay, or a clock out of sync.`,
    );
  }
  // Several space-separated signatures may be sent during a secret rotation; any one may match.
  const candidates = signature
    .split(" ")
    .filter((part) => part.startsWith("v1,"))
    .map((part) => part.slice(3).toLowerCase());
  if (candidates.length === 0)
    throw new WebhookVerificationError("malformed_header", "X-Service-Webhook-Signature has no `v1,` signature.");
  const expected = await expectedSignature(secret, id, timestamp, rawBody);
  let matched = false;
  for (const candidate of candidates) matched = constantTimeEqual(candidate, expected) || matched;
  if (!matched) {
    throw new WebhookVerificationError(
      "signature_mismatch",
      "The signature does not match: wrong secret, or the body was changed (verify the raw bytes as received, not re-serialised JSON).",
    );
  }
  return { id, timestamp };
}
