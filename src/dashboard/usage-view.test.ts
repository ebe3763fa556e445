import { describe, expect, it } from "vitest";
import type { Usage } from "./api-types";
import { fitWindow } from "./usage-view";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const NOW = new Date("2026-11-25T12:30:20Z");

/** A usage answer whose series has `runs` at the given bucket starts (every other bucket empty). */
function usage(interval: "minute" | "hour", from: number, buckets: number, runs: Record<number, number>): Usage {
  const unit = interval === "minute" ? MINUTE : HOUR;
  const zero = {
    runs: 0,
    status_2xx: 0,
    status_4xx: 0,
    status_5xx: 0,
    timeouts: 0,
    failures_app: 0,
    failures_caller: 0,
    failures_gateway: 0,
    error_rate: null,
    p50_ms: null,
    p95_ms: null,
    p99_ms: null,
    bytes_in: 0,
    bytes_out: 0,
    deliveries_delivered: 0,
    deliveries_failed: 0,
  };
  const series = Array.from({ length: buckets }, (_, i) => {
    const start = from + i * unit;
    const n = runs[start] ?? 0;
    return { ...zero, start: new Date(start).toISOString(), runs: n, status_2xx: n };
  });
  const total = Object.values(runs).reduce((a, b) => a + b, 0);
  return {
    interval,
    from: new Date(from).toISOString(),
    to: new Date(from + buckets * unit).toISOString(),
    asked: { from: new Date(from).toISOString(), to: new Date(from + buckets * unit).toISOString() },
    widened: false,
    series,
    totals: { ...zero, runs: total, status_2xx: total, refused: {} },
    percentiles: "exact",
    sampled: false,
    partial: false,
  };
}

const weekFrom = Date.parse("2026-11-18T13:00:00Z");
const recentFrom = Date.parse("2026-11-25T06:31:00Z");

describe("the window that opens where the runs are", () => {
  it("is nothing when 7 days hold no run", () => {
    expect(fitWindow(usage("hour", weekFrom, 168, {}), usage("minute", recentFrom, 360, {}), NOW)).toBeNull();
  });

  it("shows a new project's few minutes of runs by the minute, from the minute before the first, at least 15 wide", () => {
    const first = Date.parse("2026-11-25T12:27:00Z");
    const week = usage("hour", weekFrom, 168, { [Date.parse("2026-11-25T12:00:00Z")]: 5 });
    const recent = usage("minute", recentFrom, 360, { [first]: 2, [first + 2 * MINUTE]: 3 });
    const fitted = fitWindow(week, recent, NOW)!;
    expect(fitted.window.interval).toBe("minute");
    expect(fitted.usage).toBe(recent);
    // 12:26 (the minute before the first run) to the end of 12:30 is 5 minutes: widened to 15, ending with now's minute.
    expect(fitted.window.starts).toHaveLength(15);
    expect(fitted.window.to).toBe("2026-11-25T12:31:00.000Z");
    expect(fitted.window.from).toBe("2026-11-25T12:16:00.000Z");
    expect(fitted.window.during).toBe("since 12:16 UTC");
  });

  it("starts at the minute before the first run when the runs span more than 15 minutes", () => {
    const first = Date.parse("2026-11-25T10:00:00Z");
    const week = usage("hour", weekFrom, 168, { [Date.parse("2026-11-25T10:00:00Z")]: 1 });
    const recent = usage("minute", recentFrom, 360, { [first]: 1 });
    const fitted = fitWindow(week, recent, NOW)!;
    expect(fitted.window.from).toBe("2026-11-25T09:59:00.000Z");
    expect(fitted.window.starts).toHaveLength(152);
  });

  it("goes by the hour when the week's runs reach back past the last 6 hours", () => {
    const old = Date.parse("2026-11-23T08:00:00Z");
    const week = usage("hour", weekFrom, 168, { [old]: 4, [Date.parse("2026-11-25T12:00:00Z")]: 1 });
    const recent = usage("minute", recentFrom, 360, { [Date.parse("2026-11-25T12:29:00Z")]: 1 });
    const fitted = fitWindow(week, recent, NOW)!;
    expect(fitted.window.interval).toBe("hour");
    expect(fitted.usage).toBe(week);
    expect(fitted.window.from).toBe("2026-11-23T07:00:00.000Z");
    expect(fitted.window.to).toBe("2026-11-25T13:00:00.000Z");
    expect(fitted.window.during).toBe("since Nov 23, 07:00 UTC");
  });
});
