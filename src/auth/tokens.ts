import { sha256Hex } from "../platform/crypto";

/**
 * Service account tokens look like `egsa_<30 random base62><6 base62 CRC32>`: the prefix lets secret
 * scanners find leaked ones, and the checksum lets them (and us, before any lookup) tell a real token
 * from a random string, as GitHub's tokens do.
 */
export const TOKEN_PREFIX = "egsa_";
const RANDOM_LENGTH = 30;
const CHECKSUM_LENGTH = 6;
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const TOKEN_SHAPE = new RegExp(`^${TOKEN_PREFIX}[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}$`);
/** How much of a token is stored and shown to identify it. */
export const VISIBLE_PREFIX_LENGTH = TOKEN_PREFIX.length + 8;

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(text: string): number {
  let crc = 0xffffffff;
  for (let i = 0; i < text.length; i++) crc = CRC_TABLE[(crc ^ text.charCodeAt(i)) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function base62(value: number, width: number): string {
  let out = "";
  for (let i = 0; i < width; i++) {
    out = BASE62[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

function randomBase62(length: number): string {
  // Rejection sampling keeps every character equally likely (256 is not a multiple of 62).
  let out = "";
  while (out.length < length) {
    for (const byte of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

export function generateToken(): string {
  const random = randomBase62(RANDOM_LENGTH);
  return `${TOKEN_PREFIX}${random}${base62(crc32(random), CHECKSUM_LENGTH)}`;
}

/** True when `token` has the form and checksum of a service account token (it may still be unknown). */
export function isWellFormedToken(token: string): boolean {
  if (!TOKEN_SHAPE.test(token)) return false;
  const body = token.slice(TOKEN_PREFIX.length);
  const random = body.slice(0, RANDOM_LENGTH);
  return base62(crc32(random), CHECKSUM_LENGTH) === body.slice(RANDOM_LENGTH);
}

export const hashToken = (token: string) => sha256Hex(token);
