import { describe, expect, it } from "vitest";
import { ID_PATTERN, newId } from "../../platform/ids";
import { KEEPER_SHARDS, keyShard, runIdInShard, shardOf } from "./shard";

describe("a keyed run's id in its key's shard", () => {
  it("moves any run id to any shard by its last character alone, and stays a run id", () => {
    for (let n = 0; n < 200; n++) {
      const id = newId("run");
      for (let shard = 0; shard < KEEPER_SHARDS; shard++) {
        const moved = runIdInShard(id, shard);
        expect(shardOf(moved)).toBe(shard);
        expect(moved.slice(0, -1)).toBe(id.slice(0, -1));
        expect(moved).toMatch(ID_PATTERN("run"));
      }
    }
  });

  it("gives a caller's key one shard, whatever the run, and spreads keys over every shard", () => {
    expect(keyShard("sa:a", "order-42")).toBe(keyShard("sa:a", "order-42"));
    const seen = new Set(Array.from({ length: 200 }, (_, i) => keyShard("sa:a", `order-${i}`)));
    expect(seen.size).toBe(KEEPER_SHARDS);
  });
});
