import { describe, expect, it } from "vitest";
import {
  alarmBudget,
  firstAttemptFits,
  type LaneState,
  plannedHold,
  plannedRetryHold,
  retriesFit,
  shardOf,
  shardShares,
} from "./lane-plan";

const base: LaneState = { now: 0, slots: 6, holdMs: 100, gapMs: 4_250, inFlight: [], retries: [] };

describe("lane plan: a first attempt starts only if every retry owed keeps its gap", () => {
  it("a fast receiver: first attempts take the slots of deliveries between attempts (a pause holds none)", () => {
    // 60 retries owed over the next 4 s, 100 ms attempts, 6 slots: room for 240 attempts in that time.
    const retries = Array.from({ length: 60 }, (_, i) => ({ dueAt: 1_000 + i * 50, latestAt: 4_250 + i * 50 }));
    expect(firstAttemptFits({ ...base, retries })).toBe(true);
    expect(
      firstAttemptFits({
        ...base,
        retries,
        inFlight: Array.from({ length: 5 }, () => ({ startedAt: 0, mayRetry: true })),
      }),
    ).toBe(true);
  });

  it("a receiver that holds each request for the whole timeout: first attempts wait while retries would miss their gap", () => {
    const slow = { ...base, holdMs: 11_000 };
    // Six retries due in 1 s, to start within 4.25 s: each needs a slot an 11 s attempt started now would hold.
    const retries = Array.from({ length: 6 }, () => ({ dueAt: 1_000, latestAt: 4_250 }));
    expect(firstAttemptFits({ ...slow, retries })).toBe(false);
    // Five owed: the sixth slot is free for a first attempt only if its own retry then finds a slot in time.
    expect(firstAttemptFits({ ...slow, retries: retries.slice(0, 5) })).toBe(true);
    // Five owed and one in flight that may retry: its retry needs its slot back, and a new first attempt would take the last.
    expect(
      firstAttemptFits({ ...slow, retries: retries.slice(0, 5), inFlight: [{ startedAt: 0, mayRetry: true }] }),
    ).toBe(false);
    // No free slot: never.
    expect(
      firstAttemptFits({ ...base, inFlight: Array.from({ length: 6 }, () => ({ startedAt: 0, mayRetry: false })) }),
    ).toBe(false);
  });

  it("retries whose slots free in time fit; one that cannot start before its latest start does not", () => {
    const inFlight = [{ startedAt: -2_000, mayRetry: false }];
    expect(retriesFit({ ...base, slots: 1, holdMs: 3_000, inFlight, retries: [{ dueAt: 0, latestAt: 1_000 }] })).toBe(
      true,
    );
    expect(retriesFit({ ...base, slots: 1, holdMs: 3_000, inFlight, retries: [{ dueAt: 0, latestAt: 900 }] })).toBe(
      false,
    );
  });

  it("the hold it plans for: twice the longest recent one, the ceiling with no history or when an attempt outlives it", () => {
    expect(plannedHold([], 0, 250, 11_000)).toBe(11_000);
    expect(plannedHold([40, 60, 55], 30, 250, 11_000)).toBe(250);
    expect(plannedHold([40, 600, 55], 30, 250, 11_000)).toBe(1_200);
    expect(plannedHold([40, 600, 55], 1_500, 250, 11_000)).toBe(11_000);
    expect(plannedHold([9_000], 0, 250, 11_000)).toBe(11_000);
  });
});

describe("a receiver's shards", () => {
  it("⌈concurrency ÷ 6⌉ shards whose shares add up to the concurrency, none above 6", () => {
    expect(shardShares(1, 6)).toEqual([1]);
    expect(shardShares(6, 6)).toEqual([6]);
    expect(shardShares(7, 6)).toEqual([4, 3]);
    expect(shardShares(12, 6)).toEqual([6, 6]);
    expect(shardShares(30, 6)).toEqual([6, 6, 6, 6, 6]);
    for (let c = 1; c <= 30; c++) {
      const shares = shardShares(c, 6);
      expect(shares.reduce((a, b) => a + b, 0)).toBe(c);
      expect(Math.max(...shares)).toBeLessThanOrEqual(6);
      expect(Math.min(...shares)).toBeGreaterThanOrEqual(1);
    }
  });

  it("spreads deliveries by id evenly enough, and always the same way", () => {
    const counts = [0, 0, 0, 0, 0];
    for (let i = 0; i < 5_000; i++) counts[shardOf(`whd_${i.toString(36)}`, 5)]!++;
    for (const n of counts) expect(n).toBeGreaterThan(800);
    expect(shardOf("whd_abc", 3)).toBe(shardOf("whd_abc", 3));
  });
});

describe("an alarm's budget: near its bound it keeps what the retries owed may need", () => {
  it("starts first attempts only while what is left covers all three of each beside the attempts owed; retries while any is left", () => {
    expect(alarmBudget(166, 0, true, 3)).toEqual({ retries: 166, firsts: 55 });
    // 10 deliveries between attempts or in flight may need 20 more: 4 first attempts fit in the 32 left.
    expect(alarmBudget(32, 20, true, 3)).toEqual({ retries: 32, firsts: 4 });
    // Near the bound, first attempts stop and the retries owed keep what is left.
    expect(alarmBudget(20, 20, true, 3)).toEqual({ retries: 20, firsts: 0 });
    expect(alarmBudget(2, 20, true, 3)).toEqual({ retries: 2, firsts: 0 });
    // Past the wall time: retries only.
    expect(alarmBudget(166, 0, false, 3)).toEqual({ retries: 166, firsts: 0 });
    expect(alarmBudget(0, 0, true, 3)).toEqual({ retries: 0, firsts: 0 });
  });
});

describe("the hold planned for each retry owed", () => {
  it("is twice the mean of the recent holds, within its floor and ceiling; the ceiling with no history", () => {
    expect(plannedRetryHold([], 50, 1_500)).toBe(1_500);
    // One timeout in six among quick answers: the mean, not the longest, is what the owed retries add up to.
    expect(plannedRetryHold([20, 20, 20, 20, 20, 520], 50, 1_500)).toBeCloseTo(2 * (620 / 6));
    expect(plannedRetryHold([5, 5], 50, 1_500)).toBe(50);
    expect(plannedRetryHold([1_400, 1_400], 50, 1_500)).toBe(1_500);
  });
});
