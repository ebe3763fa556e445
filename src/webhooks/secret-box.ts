import { fromBase64, toBase64 } from "../platform/encoding";
import { aesKeyFromSecret } from "../platform/crypto";

/**
 * Webhook secrets wait in the queue encrypted: AES-256-GCM under a key derived (HKDF-SHA-256) from
 * `WEBHOOK_ENCRYPTION_KEY`, with the delivery id as additional data so a ciphertext cannot be moved
 * to another delivery. The clear secret is never stored or logged.
 */
export interface SealedSecret {
  iv: string;
  ct: string;
}

const encoder = new TextEncoder();
const aesKey = (material: string) => aesKeyFromSecret(material, "edge-gateway", "webhook-secret/v1");

export async function sealSecret(material: string, deliveryId: string, secret: string): Promise<SealedSecret> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: encoder.encode(deliveryId) }, await aesKey(material), encoder.encode(secret));
  return { iv: toBase64(iv), ct: toBase64(new Uint8Array(ct)) };
}

/** Throws when the key changed or the ciphertext was tampered with. */
export async function openSecret(material: string, deliveryId: string, sealed: SealedSecret): Promise<string> {
  const clear = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: fromBase64(sealed.iv), additionalData: encoder.encode(deliveryId) },
    await aesKey(material),
    fromBase64(sealed.ct),
  );
  return new TextDecoder().decode(clear);
}
