import { describe, expect, it } from "vitest";
import { MAX_RETRY_DELAY_SECONDS, RETRY_DELAYS_SECONDS } from "../policy";
import { INTERRUPTED_RETRY_MS, schedule } from "./schedule";
import type { SentAttempt } from "./send";

const at = new Date("2026-11-25T12:00:00.000Z");
const sent = (over: Partial<SentAttempt>): SentAttempt => ({
  attempt: 1,
  at,
  endedAt: at.getTime() + 200,
  durationMs: 200,
  statusCode: 404,
  error: null,
  outcome: "retry",
  retryAfter: null,
  reason: "",
  ...over,
});

describe("schedule: what a delivery does after an attempt", () => {
  it("settles a delivered or failed attempt, and interrupts an unrecorded one whatever its outcome", () => {
    expect(schedule({ sent: sent({ outcome: "delivered", statusCode: 204 }), recorded: true }, 0)).toEqual({
      kind: "settled",
      outcome: "delivered",
    });
    expect(schedule({ sent: sent({ outcome: "failed", statusCode: 410 }), recorded: true }, 0)).toEqual({
      kind: "settled",
      outcome: "failed",
    });
    expect(schedule({ sent: sent({ outcome: "delivered" }), recorded: false }, 0)).toEqual({
      kind: "interrupted",
      ms: INTERRUPTED_RETRY_MS,
    });
  });

  it("pauses 1 s after attempt 1 and 3 s after attempt 2, counted from the end of the request (the record's write is inside the pause)", () => {
    const first = sent({});
    expect(schedule({ sent: first, recorded: true }, first.endedAt)).toEqual({
      kind: "pause",
      ms: RETRY_DELAYS_SECONDS[0] * 1000,
    });
    expect(schedule({ sent: first, recorded: true }, first.endedAt + 30)).toEqual({
      kind: "pause",
      ms: RETRY_DELAYS_SECONDS[0] * 1000 - 30,
    });
    const second = sent({ attempt: 2 });
    expect(schedule({ sent: second, recorded: true }, second.endedAt)).toEqual({
      kind: "pause",
      ms: RETRY_DELAYS_SECONDS[1] * 1000,
    });
    // A write slower than the pause leaves none, never a negative one.
    expect(schedule({ sent: first, recorded: true }, first.endedAt + 5_000)).toEqual({ kind: "pause", ms: 0 });
  });

  it("honours Retry-After up to the cap that keeps the gap within 5 s", () => {
    expect(schedule({ sent: sent({ retryAfter: "2" }), recorded: true }, at.getTime() + 200)).toEqual({
      kind: "pause",
      ms: 2000,
    });
    expect(schedule({ sent: sent({ retryAfter: "120" }), recorded: true }, at.getTime() + 200)).toEqual({
      kind: "pause",
      ms: MAX_RETRY_DELAY_SECONDS * 1000,
    });
  });
});
