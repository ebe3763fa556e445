/**
 * Which keeper holds a waited run: one Durable Object per project and shard, the shard read from the
 * run id (its last 8 characters), so a run's keeper is found from the ids the caller holds. A run
 * started under an `Idempotency-Key` gets a run id in the shard of its caller and key
 * (`idInShard(newId, keyShard(caller, key))`, platform/shards.ts): every retry under that key reaches the same keeper,
 * which keeps the key's run (keeper.ts). docs/runs.md#the-keeper.
 */
import { PROJECT_SHARDS, shardOf } from "../../platform/shards";

/** Shards of a project's keepers: a project's waited runs in flight spread over this many objects. */
export const KEEPER_SHARDS = PROJECT_SHARDS;

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
