import { invalidField } from "../platform/errors";
import { sha256Hex } from "../platform/crypto";
import { isGatewayParam } from "./path";
import type { StoredBody } from "./bodies";

/**
 * `Idempotency-Key`, the same in every mode that keeps a run under it (a waited run, an async run): the
 * first request with a key makes the run, a retry of the same request attaches to it, a different
 * request under the key is a 422. Admission reads the key and hashes the request once (admit.ts); the
 * key's keeper (a waited run) or the async store (an async run) holds it. docs/runs.md#idempotency-key.
 */

/** Stripe's rule: a key answers the same run for 24 hours, then may name a new one. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000;
const KEY = /^[\x21-\x7e]{1,255}$/;

/** The caller's `Idempotency-Key`, checked (a 400 naming the header); `null` without one. */
export function idempotencyKeyOf(request: Request): string | null {
  const key = request.headers.get("idempotency-key");
  if (key !== null && !KEY.test(key))
    throw invalidField("header", "Idempotency-Key", "must be 1 to 255 visible ASCII characters");
  return key;
}

/** The caller's query without our own parameters, as the request's hash has always named it. */
function forwardedQuery(query: URLSearchParams | null): URLSearchParams | null {
  if (query === null) return null;
  const kept = new URLSearchParams();
  for (const [name, value] of query) if (!isGatewayParam(name)) kept.append(name, value);
  return kept;
}

/** What a request's hash covers: its method, app, path, query, webhook endpoint, and body read whole (as a run stores it). */
export interface HashedRequest {
  method: string;
  appName: string;
  appPath: string;
  query: URLSearchParams | null;
  webhookEndpoint: string | null;
  body: StoredBody | null;
}

/**
 * What a key stands for, in every mode: the hash of the method, app, path, query (but the gateway's own
 * parameters), `webhookEndpoint` and body. A UTF-8 body hashes as its text, as it always has (a key
 * given before this change still matches); any other as an object of its base64, which no text body
 * can equal, so different bytes never share a hash.
 */
export function requestHashOf(request: HashedRequest): Promise<string> {
  const query = forwardedQuery(request.query);
  const { body } = request;
  const hashedBody = body === null ? null : body.encoding === "utf8" ? body.text : { base64: body.text };
  return sha256Hex(
    JSON.stringify([
      request.method,
      request.appName,
      request.appPath,
      query?.toString() ?? "",
      request.webhookEndpoint,
      hashedBody,
    ]),
  );
}
