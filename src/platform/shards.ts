/**
 * Which shard of a project's data-plane objects holds a record: read from the record's id alone (its
 * last 8 characters, the random part), so every object is found from the ids the caller holds and never
 * by a lookup. A run's keeper (runs/wait/shard.ts) is named by its run id's shard; a delivery's id is
 * made in the shard of its run (`idInShardOf`), so a run and its deliveries share a shard number and a
 * run's deliveries are found in one shard's object, not in all of them (docs/architecture.md#the-sixth-waves-moves-seams-agreed-before-either-moves).
 */

/** Shards of a project's objects of one kind: its records spread over this many. */
export const PROJECT_SHARDS = 8;

/** A 32-bit rolling hash of the last 8 characters of an id (their random part). */
function tailHash(id: string): number {
  let hash = 0;
  for (let i = id.length - 8; i < id.length; i++) hash = (hash * 31 + id.charCodeAt(i)) >>> 0;
  return hash;
}

/** The shard of the record whose id is `id`. */
export const shardOf = (id: string): number => tailHash(id) % PROJECT_SHARDS;

/** Crockford digits: their codes cover every residue modulo 8 (48..55). */
const DIGITS = "01234567";

/**
 * `id` moved to `shard` by its last character alone: the tail hash changes by the difference of the
 * last character's codes (the last step adds it, modulo 2^32, a multiple of 8), so one digit of the 8
 * reaches any shard. 97 of the id's 100 random bits stay random; its prefix and time part are untouched.
 */
export function idInShard(id: string, shard: number): string {
  const last = id.charCodeAt(id.length - 1);
  const now = shardOf(id);
  const wanted = (last + shard - now + 8 * PROJECT_SHARDS) % PROJECT_SHARDS;
  const digit = DIGITS.split("").find((d) => d.charCodeAt(0) % PROJECT_SHARDS === wanted)!;
  return id.slice(0, -1) + digit;
}

/** `id` moved to the shard of `other` (a delivery's id to its run's). */
export const idInShardOf = (id: string, other: string): string => idInShard(id, shardOf(other));
