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
  const ct = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: encoder.encode(deliveryId) },
    await aesKey(material),
    encoder.encode(secret),
  );
  return { iv: toBase64(iv), ct: toBase64(new Uint8Array(ct)) };
}

/**
 * Opens a sealed secret with the current key, or, during a rotation, with the previous one
 * (`WEBHOOK_ENCRYPTION_KEY_PREVIOUS`): secrets sealed before the rotation wait in queue messages, lanes,
 * async runs and, for resends, D1 for up to the 7 days of retention. Throws (`OperationError`) when
 * neither key opens it or the ciphertext was tampered with.
 */
export async function openSecret(
  material: string,
  deliveryId: string,
  sealed: SealedSecret,
  previous?: string,
): Promise<string> {
  const open = async (key: string) =>
    crypto.subtle.decrypt(
      { name: "AES-GCM", iv: fromBase64(sealed.iv), additionalData: encoder.encode(deliveryId) },
      await aesKey(key),
      fromBase64(sealed.ct),
    );
  let clear: ArrayBuffer;
  try {
    clear = await open(material);
  } catch (error) {
    if (previous === undefined) throw error;
    clear = await open(previous);
  }
  return new TextDecoder().decode(clear);
}
