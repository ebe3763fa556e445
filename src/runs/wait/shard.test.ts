import { describe, expect, it } from "vitest";
import { KEEPER_SHARDS, keyShard } from "./shard";

describe("a keyed run's keeper", () => {
  it("gives a caller's key one shard, whatever the run, and spreads keys over every shard", () => {
    expect(keyShard("sa:a", "order-42")).toBe(keyShard("sa:a", "order-42"));
    const seen = new Set(Array.from({ length: 200 }, (_, i) => keyShard("sa:a", `order-${i}`)));
    expect(seen.size).toBe(KEEPER_SHARDS);
  });
});
