import { describe, expect, it } from "vitest";
import { ID_PATTERN, newId } from "./ids";

describe("ids", () => {
  it("are prefixed, 30 lower-case base32 characters, and unique", () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newId("run", 1_700_000_000_000)));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(ID_PATTERN("run"));
  });

  it("sort by creation time, also across a change of millisecond", () => {
    const times = [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_031, 1_700_000_000_032, 1_800_000_000_000];
    const ids = times.map((t) => newId("bld", t));
    expect([...ids].sort()).toEqual(ids);
    // The same instant gives the same time part.
    expect(newId("bld", times[0]).slice(0, 14)).toBe(ids[0]!.slice(0, 14));
  });

  it("use every base32 character with about equal frequency", () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 2000; i++)
      for (const char of newId("req").slice(14)) counts.set(char, (counts.get(char) ?? 0) + 1);
    expect(counts.size).toBe(32);
    for (const count of counts.values()) expect(count).toBeGreaterThan((2000 * 20) / 32 / 2);
  });
});
