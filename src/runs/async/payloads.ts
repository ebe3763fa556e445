import { log } from "../../platform/log";
import { fromBase64 } from "../../platform/encoding";
import type { RequestBodyEncoding } from "../../db/schema";

/**
 * Request bodies and results up to this size stay in their D1 row; larger ones go to R2 (`RUN_PAYLOADS`).
 * D1 allows 2,000,000 bytes per row: a request body and a result of this size together, with the
 * headers (Workers cap them at 128 KB), stay well within it.
 */
export const INLINE_PAYLOAD_MAX_BYTES = 256 * 1024;

export const requestKey = (runId: string) => `runs/${runId}/request`;
export const resultKey = (runId: string) => `runs/${runId}/result`;

export const byteLength = (text: string) => new TextEncoder().encode(text).byteLength;

/** The exact bytes of a stored request body (bytes, not text, so nothing adds a `Content-Type` the caller did not send). */
export const bodyBytes = (text: string, encoding: RequestBodyEncoding): Uint8Array =>
  encoding === "base64" ? fromBase64(text) : new TextEncoder().encode(text);

/** Where a payload lives: inline text for the row, or `null` once it has been put in R2 under `key`. */
export async function placePayload(
  env: Env,
  key: string,
  text: string,
  bytes = byteLength(text),
): Promise<{ inline: string | null; inR2: boolean }> {
  if (bytes <= INLINE_PAYLOAD_MAX_BYTES) return { inline: text, inR2: false };
  await env.RUN_PAYLOADS.put(key, text, { httpMetadata: { contentType: "application/json" } });
  return { inline: null, inR2: true };
}

/** The payload's text: inline, or read from R2; `null` when R2 no longer has it. */
export async function readPayload(env: Env, key: string, inline: string | null, inR2: boolean): Promise<string | null> {
  if (!inR2) return inline;
  const object = await env.RUN_PAYLOADS.get(key);
  return object ? object.text() : null;
}

/** Removes a run's payloads from R2 (a missing key is not an error); failures are left to the purge. */
export async function dropPayloads(env: Env, keys: string[]): Promise<void> {
  // R2 deletes up to 1,000 keys per call.
  for (let i = 0; i < keys.length; i += 1000) {
    await env.RUN_PAYLOADS.delete(keys.slice(i, i + 1000)).catch((error: unknown) => {
      log("error", "run payloads not deleted", { keys: keys.length, error });
    });
  }
}
