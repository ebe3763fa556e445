/**
 * Which keeper holds a waited run: one Durable Object per project and shard, the shard read from the
 * run id (its last 8 characters), so a run's keeper is found from the ids the caller holds. A run
 * started under an `Idempotency-Key` gets a run id in the shard of its caller and key
 * (`runIdInShard(newId, keyShard(caller, key))`): every retry under that key reaches the same keeper,
 * which keeps the key's run (keeper.ts). docs/runs.md#the-keeper.
 */

/** Shards of a project's keepers: a project's waited runs in flight spread over this many objects. */
export const KEEPER_SHARDS = 8;

/** A 32-bit rolling hash of the last 8 characters of a run id (their random part). */
function tailHash(runId: string): number {
  let hash = 0;
  for (let i = runId.length - 8; i < runId.length; i++) hash = (hash * 31 + runId.charCodeAt(i)) >>> 0;
  return hash;
}

/** The shard of run `runId`. */
export const shardOf = (runId: string): number => tailHash(runId) % KEEPER_SHARDS;

/** The keeper of `projectId`'s shard `shard`: the name of its Durable Object. */
export const keeperOfShard = (projectId: string, shard: number): string => `${projectId}:${shard}`;

/** The keeper of `runId` of `projectId`: the name of its Durable Object. */
export const keeperName = (projectId: string, runId: string): string => keeperOfShard(projectId, shardOf(runId));

/** The keeper object named `name` (`keeperName`): every keeper is addressed through this. */
export const keeperObject = (env: Env, name: string) => env.RUN_KEEPER.get(env.RUN_KEEPER.idFromName(name));

/**
 * The shard of a caller's `Idempotency-Key` (FNV-1a over caller and key). Not a secret: a caller who
 * chooses keys chooses its keeper, and its share of that keeper is bounded as any caller's is.
 */
export function keyShard(caller: string, key: string): number {
  let hash = 0x811c9dc5;
  const text = `${caller}\n${key}`;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash % KEEPER_SHARDS;
}

/** Crockford digits: their codes cover every residue modulo 8 (48..55). */
const DIGITS = "01234567";

/**
 * `runId` moved to `shard` by its last character alone: the tail hash changes by the difference of the
 * last character's codes (the last step adds it, modulo 2^32, a multiple of 8), so one digit of the 8
 * reaches any shard. 97 of the id's 100 random bits stay random.
 */
export function runIdInShard(runId: string, shard: number): string {
  const last = runId.charCodeAt(runId.length - 1);
  const now = shardOf(runId);
  const wanted = (last + shard - now + 8 * KEEPER_SHARDS) % KEEPER_SHARDS;
  const digit = DIGITS.split("").find((d) => d.charCodeAt(0) % KEEPER_SHARDS === wanted)!;
  return runId.slice(0, -1) + digit;
}
