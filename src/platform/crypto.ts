import { toHex } from "./encoding";

const encoder = new TextEncoder();

/** The SHA-256 of a text (its UTF-8 bytes) or of bytes, in lowercase hex. */
export async function sha256Hex(value: string | Uint8Array): Promise<string> {
  return toHex(await crypto.subtle.digest("SHA-256", typeof value === "string" ? encoder.encode(value) : value));
}

/**
 * Compares two secrets in time that does not depend on where they differ: both are hashed first,
 * so the comparison also hides their lengths.
 */
export async function secretsEqual(a: string, b: string): Promise<boolean> {
  const [ha, hb] = await Promise.all([
    crypto.subtle.digest("SHA-256", encoder.encode(a)),
    crypto.subtle.digest("SHA-256", encoder.encode(b)),
  ]);
  return crypto.subtle.timingSafeEqual(ha, hb);
}

// Per purpose (salt and info), the keys of the last two secrets seen: the current one and, during a
// rotation, the previous one; a third secret drops the oldest.
const aesKeys = new Map<string, Map<string, Promise<CryptoKey>>>();

/**
 * An AES-256-GCM key derived by HKDF-SHA-256 from a secret setting, for one purpose (`salt`, `info`).
 * Derived once per isolate; looked up by a Map, never by comparing the secret.
 */
export function aesKeyFromSecret(secret: string, salt: string, info: string): Promise<CryptoKey> {
  const purpose = `${salt}\n${info}`;
  let byPurpose = aesKeys.get(purpose);
  if (!byPurpose) aesKeys.set(purpose, (byPurpose = new Map()));
  let key = byPurpose.get(secret);
  if (!key) {
    key = crypto.subtle
      .importKey("raw", encoder.encode(secret), "HKDF", false, ["deriveKey"])
      .then((material) =>
        crypto.subtle.deriveKey(
          { name: "HKDF", hash: "SHA-256", salt: encoder.encode(salt), info: encoder.encode(info) },
          material,
          { name: "AES-GCM", length: 256 },
          false,
          ["encrypt", "decrypt"],
        ),
      );
    if (byPurpose.size >= 2) byPurpose.delete(byPurpose.keys().next().value!);
    byPurpose.set(secret, key);
  }
  return key;
}
