const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";

export type IdPrefix = "proj" | "sa" | "bld" | "req" | "run" | "whd" | "dom";

function base32(bytes: Uint8Array): string {
  let out = "";
  for (const byte of bytes) out += CROCKFORD[byte & 31];
  return out;
}

/**
 * `prefix_` + 10 characters of creation time (ms, base32, so ids sort by creation) + 20 random
 * characters (100 bits, so ids cannot be guessed). Lower case: ids appear in hostnames and paths.
 */
export function newId(prefix: IdPrefix, now = Date.now()): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return `${prefix}_${time}${base32(crypto.getRandomValues(new Uint8Array(20)))}`;
}

export const ID_PATTERN = (prefix: IdPrefix) => new RegExp(`^${prefix}_[0-9a-hjkmnp-tv-z]{30}$`);
