import { describe, expect, it } from "vitest";
import { ID_PATTERN, newId } from "./ids";
import { idInShard, idInShardOf, PROJECT_SHARDS, shardOf } from "./shards";

describe("an id in a chosen shard", () => {
  it("moves any id to any shard by its last character alone, and stays an id of its kind", () => {
    for (const prefix of ["run", "whd"] as const)
      for (let n = 0; n < 200; n++) {
        const id = newId(prefix);
        for (let shard = 0; shard < PROJECT_SHARDS; shard++) {
          const moved = idInShard(id, shard);
          expect(shardOf(moved)).toBe(shard);
          expect(moved.slice(0, -1)).toBe(id.slice(0, -1));
          expect(moved).toMatch(ID_PATTERN(prefix));
        }
      }
  });

  it("puts a delivery's id in its run's shard, and new ids of one run still differ", () => {
    const run = newId("run");
    const ids = Array.from({ length: 50 }, () => idInShardOf(newId("whd"), run));
    for (const id of ids) expect(shardOf(id)).toBe(shardOf(run));
    expect(new Set(ids).size).toBe(ids.length);
  });
});
