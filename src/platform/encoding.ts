/** Byte encodings used across the service, defined once. */

export function toHex(buffer: ArrayBuffer | Uint8Array): string {
  const bytes = buffer instanceof Uint8Array ? buffer : new Uint8Array(buffer);
  let hex = "";
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0");
  return hex;
}

export function toBase64(buffer: ArrayBuffer | Uint8Array): string {
  const bytes = buffer instanceof Uint8Array ? buffer : new Uint8Array(buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** Standard base64 to bytes; throws on text that is not base64. */
export const fromBase64 = (value: string): Uint8Array => Uint8Array.from(atob(value), (ch) => ch.charCodeAt(0));

/** RFC 4648 section 5, without padding: safe in URLs and cookies. */
export const toBase64Url = (buffer: ArrayBuffer | Uint8Array): string =>
  toBase64(buffer).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

/** The inverse of `toBase64Url`; throws on text that is not base64url. */
export const fromBase64Url = (value: string): Uint8Array => fromBase64(value.replace(/-/g, "+").replace(/_/g, "/"));
