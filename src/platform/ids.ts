const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";
const CODES = Uint8Array.from(CROCKFORD, (char) => char.charCodeAt(0));
const decoder = new TextDecoder();

export type IdPrefix =
  | "proj"
  | "sa"
  | "bld"
  | "req"
  | "run"
  | "whd"
  | "dom"
  | "aud"
  | "usr"
  | "mem"
  | "inv"
  // A receiver task (recover, release; src/webhooks/receiver-tasks.ts) and an alert event (src/webhooks/alerts.ts).
  | "wrt"
  | "evt";

// Every request makes two ids (request and run): the time part is reused within a millisecond and the
// random part is encoded in place, which the run path's CPU profile showed to matter.
let lastTime = -1;
let lastTimePart = "";
function timePart(now: number): string {
  if (now !== lastTime) {
    let time = "";
    let t = now;
    for (let i = 0; i < 10; i++) {
      time = CROCKFORD[t % 32] + time;
      t = Math.floor(t / 32);
    }
    lastTime = now;
    lastTimePart = time;
  }
  return lastTimePart;
}

// Random bytes are drawn 64 ids at a time (one call into the runtime instead of one per id) and each
// byte is used once. Filled on first use: Workers allow no randomness at module scope.
const RANDOM_CHARS = 20;
const pool = new Uint8Array(RANDOM_CHARS * 64);
let used = pool.length;

/**
 * `prefix_` + 10 characters of creation time (ms, base32, so ids sort by creation) + 20 random
 * characters (100 bits, so ids cannot be guessed). Lower case: ids appear in hostnames and paths.
 */
export function newId(prefix: IdPrefix, now = Date.now()): string {
  if (used === pool.length) {
    crypto.getRandomValues(pool);
    used = 0;
  }
  const random = pool.subarray(used, used + RANDOM_CHARS);
  used += RANDOM_CHARS;
  for (let i = 0; i < RANDOM_CHARS; i++) random[i] = CODES[random[i]! & 31]!;
  return `${prefix}_${timePart(now)}${decoder.decode(random)}`;
}

/**
 * The least id of `prefix` made at `now` or later: every id made before `now` sorts below it, every id
 * made at or after it sorts at or above it (the time part leads, the random part follows). A retention
 * purge deletes by it over the primary key's index, with no index on a timestamp.
 */
export const idFloor = (prefix: IdPrefix, now: number): string => `${prefix}_${timePart(now)}`;

/** The part of an id after its prefix, as a regular expression's source: 30 characters of Crockford base32. */
export const ID_BODY = "[0-9a-hjkmnp-tv-z]{30}";

export const ID_PATTERN = (prefix: IdPrefix) => new RegExp(`^${prefix}_${ID_BODY}$`);

/**
 * An id whose random part is derived from `material` (SHA-256): the same material and time give the
 * same id, so a step that may run twice (a slice of a task, run again after a crash) writes one row,
 * by `ON CONFLICT DO NOTHING`. Unguessable as long as `material` holds an id that is.
 */
export async function derivedId(prefix: IdPrefix, now: number, material: string): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(material)));
  const random = Uint8Array.from(hash.subarray(0, RANDOM_CHARS), (b) => CODES[b & 31]!);
  return `${prefix}_${timePart(now)}${decoder.decode(random)}`;
}
