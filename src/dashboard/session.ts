import { secretsEqual } from "../platform/crypto";
import { fromBase64Url, toBase64Url } from "../platform/encoding";

/**
 * Dashboard sessions are stateless signed cookies. The signing key is derived from ADMIN_TOKEN with
 * HKDF, so no other setting is needed. Rotating the admin token ends every session at once, unless
 * `ADMIN_TOKEN_PREVIOUS` names the token being replaced: then a cookie signed under it is still read,
 * and signed again under the current token (docs/operations.md, rotating secrets).
 */

/** How long a signed-in session lasts; the operator signs in again afterwards. */
export const SESSION_TTL_MS = 8 * 60 * 60 * 1000;
/** An anonymous session only carries the sign-in form's CSRF token. */
export const ANONYMOUS_TTL_MS = 30 * 60 * 1000;

export interface Session {
  /** Random per session; CSRF tokens are bound to it. A new one is issued at sign-in (no fixation). */
  sid: string;
  signedIn: boolean;
  expiresAt: number;
  /** The person signed in with OpenID Connect (`users.id`); absent for the operator (admin token). */
  userId?: string;
}

const encoder = new TextEncoder();
const keys = new Map<string, Promise<CryptoKey>>();

function fromBase64url(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return null;
  try {
    return fromBase64Url(text);
  } catch {
    return null;
  }
}

/** The HMAC key of sessions and CSRF tokens, derived from the admin token (cached per token). */
export function sessionKey(adminToken: string): Promise<CryptoKey> {
  let key = keys.get(adminToken);
  if (!key) {
    key = (async () => {
      const material = await crypto.subtle.importKey("raw", encoder.encode(adminToken), "HKDF", false, ["deriveKey"]);
      return crypto.subtle.deriveKey(
        {
          name: "HKDF",
          hash: "SHA-256",
          salt: encoder.encode("edge-gateway/dashboard"),
          info: encoder.encode("session-hmac-v1"),
        },
        material,
        { name: "HMAC", hash: "SHA-256", length: 256 },
        false,
        ["sign", "verify"],
      );
    })();
    // Only the current admin token and, during a rotation, the previous one matter.
    if (keys.size >= 2) keys.delete(keys.keys().next().value!);
    keys.set(adminToken, key);
  }
  return key;
}

export function newSession(now: number, signedIn: boolean, userId?: string): Session {
  return {
    sid: toBase64Url(crypto.getRandomValues(new Uint8Array(18))),
    signedIn,
    expiresAt: now + (signedIn ? SESSION_TTL_MS : ANONYMOUS_TTL_MS),
    ...(userId ? { userId } : {}),
  };
}

export async function encodeSession(key: CryptoKey, session: Session): Promise<string> {
  const payload = toBase64Url(
    encoder.encode(
      JSON.stringify({ v: 1, sid: session.sid, in: session.signedIn, exp: session.expiresAt, u: session.userId }),
    ),
  );
  const signature = await crypto.subtle.sign("HMAC", key, encoder.encode(`session.${payload}`));
  return `${payload}.${toBase64Url(signature)}`;
}

/** The session in a cookie value, or null when it is forged, malformed or expired. */
export async function decodeSession(key: CryptoKey, value: string | undefined, now: number): Promise<Session | null> {
  if (!value || value.length > 1024) return null;
  const [payload, signature, extra] = value.split(".");
  if (payload === undefined || signature === undefined || extra !== undefined) return null;
  const signatureBytes = fromBase64url(signature);
  if (!signatureBytes) return null;
  // verify() compares in constant time.
  const valid = await crypto.subtle.verify("HMAC", key, signatureBytes, encoder.encode(`session.${payload}`));
  if (!valid) return null;
  const bytes = fromBase64url(payload);
  if (!bytes) return null;
  let data: unknown;
  try {
    data = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return null;
  }
  if (typeof data !== "object" || data === null) return null;
  const { v, sid, in: signedIn, exp, u } = data as Record<string, unknown>;
  if (v !== 1 || typeof sid !== "string" || typeof signedIn !== "boolean" || typeof exp !== "number") return null;
  if (u !== undefined && typeof u !== "string") return null;
  if (exp <= now) return null;
  return { sid, signedIn, expiresAt: exp, ...(u ? { userId: u } : {}) };
}

/** The synchroniser token of a session: every form of the session carries it. */
export async function csrfToken(key: CryptoKey, session: Session): Promise<string> {
  return toBase64Url(await crypto.subtle.sign("HMAC", key, encoder.encode(`csrf.${session.sid}`)));
}

export async function csrfTokenValid(key: CryptoKey, session: Session, token: unknown): Promise<boolean> {
  if (typeof token !== "string" || token.length === 0 || token.length > 128) return false;
  return secretsEqual(token, await csrfToken(key, session));
}

/**
 * A state-changing request must come from a page of this origin: `Origin` equal to ours, or, where a
 * browser sends no Origin, `Sec-Fetch-Site: same-origin`. Requests carrying neither are refused.
 */
export function sameOrigin(requestUrl: string, headers: Headers): boolean {
  const origin = headers.get("origin");
  if (origin !== null) return origin === new URL(requestUrl).origin;
  return headers.get("sec-fetch-site") === "same-origin";
}
