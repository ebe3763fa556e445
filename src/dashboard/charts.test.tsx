import { describe, expect, it } from "vitest";
import { Lines, MIN_SEGMENT, niceTicks, segmentHeights, Sparkline, StackedBars, timeTicks } from "./charts";
import { ago, bytes, count, duration, durationAxis, percent } from "./format";

const render = async (node: unknown) => String(await (node as { toString(): string | Promise<string> }).toString());
const HOUR = 3_600_000;
const T0 = Date.parse("2026-11-24T00:00:00Z");
const hours = (n: number) => Array.from({ length: n }, (_, i) => T0 + i * HOUR);
const attrs = (svg: string, tag: string, cls: string) =>
  [...svg.matchAll(new RegExp(`<${tag} class="${cls}"([^>]*)>`, "g"))].map((m) =>
    Object.fromEntries([...m[1]!.matchAll(/([\w-]+)="([^"]*)"/g)].map((a) => [a[1], a[2]])),
  );

describe("chart scales", () => {
  it("rounds the value axis up to a round step a person reads at a glance", () => {
    expect(niceTicks(0)).toEqual([0, 1]);
    expect(niceTicks(7)).toEqual([0, 2, 4, 6, 8]);
    expect(niceTicks(8)).toEqual([0, 2, 4, 6, 8]);
    expect(niceTicks(1234)).toEqual([0, 500, 1000, 1500]);
    expect(niceTicks(0.3)).toEqual([0, 0.1, 0.2, 0.3]);
    // Counts: whole steps only.
    expect(niceTicks(1, true)).toEqual([0, 1]);
    expect(niceTicks(3, true)).toEqual([0, 1, 2, 3]);
    expect(niceTicks(10, true)).toEqual([0, 5, 10]);
    expect(niceTicks(1234, true)).toEqual([0, 500, 1000, 1500]);
    expect(niceTicks(1)).toEqual([0, 0.25, 0.5, 0.75, 1]);
  });

  it("labels the time axis at round times, at most seven", () => {
    const minutes = Array.from({ length: 60 }, (_, i) => Date.parse("2026-11-24T13:07:00Z") + i * 60_000);
    expect(timeTicks(minutes, "minute").map((t) => t.label)).toEqual([
      "13:10",
      "13:20",
      "13:30",
      "13:40",
      "13:50",
      "14:00",
    ]);
    expect(timeTicks(hours(24), "hour").map((t) => t.label)).toEqual([
      "00:00",
      "04:00",
      "08:00",
      "12:00",
      "16:00",
      "20:00",
    ]);
    const week = timeTicks(hours(168), "hour");
    expect(week.map((t) => t.label)).toEqual(["Nov 24", "Nov 25", "Nov 26", "Nov 27", "Nov 28", "Nov 29", "Nov 30"]);
    expect(week.map((t) => t.index)).toEqual([0, 24, 48, 72, 96, 120, 144]);
  });
});

describe("runs and errors as stacked bars", () => {
  const props = {
    id: "runs",
    title: "Runs",
    starts: hours(4),
    interval: "hour" as const,
    layers: [
      { label: "2xx", tone: "c2xx" as const, values: [6, 0, 2, 0] },
      { label: "5xx", tone: "c5xx" as const, values: [2, 0, 0, 1] },
    ],
    short: String,
    full: count,
    summary: "11 runs, 3 failed.",
  };

  it("stacks each bucket's classes in proportion to the axis", async () => {
    const svg = await render(<StackedBars {...props} />);
    const ok = attrs(svg, "rect", "tone-c2xx");
    const failed = attrs(svg, "rect", "tone-c5xx");
    // The axis tops at 8 (ticks 0, 2, 4, 6, 8) over a plot 166 units high: 6 runs are 124.5, 2 are 41.5.
    expect(ok.map((r) => r.height)).toEqual(["124.5", "41.5"]);
    expect(failed.map((r) => r.height)).toEqual(["41.5", "20.75"]);
    // The failures sit on top of the successes of the same bucket: the 5xx bar ends where the 2xx bar begins.
    expect(Number(failed[0]!.y) + Number(failed[0]!.height)).toBeCloseTo(Number(ok[0]!.y));
    expect(ok[0]!.x).toBe(failed[0]!.x);
    // Empty buckets draw no bar, but keep a hover target with their tooltip.
    expect(svg).toContain("<title>Nov 24, 01:00 UTC: 2xx 0, 5xx 0</title>");
  });

  it("is an image named by its caption and summary, with its figures as a table", async () => {
    const svg = await render(<StackedBars {...props} />);
    expect(svg).toContain('role="img" aria-labelledby="runs-title runs-desc"');
    expect(svg).toContain('<figcaption id="runs-title">Runs</figcaption>');
    expect(svg).toContain('<desc id="runs-desc">11 runs, 3 failed.</desc>');
    expect(svg).toMatch(/<th scope="row">Nov 24, 00:00<\/th><td>6<\/td><td>2<\/td>/);
    expect(svg).not.toMatch(/style=/); // the CSP allows no inline style
  });
});

describe("latency percentiles as lines", () => {
  it("breaks a line where a bucket had no runs, and marks a lone point among many", async () => {
    // 40 hours with a value but the fourth from last alone: past low volume only lone points are marked.
    const values: (number | null)[] = Array.from({ length: 44 }, (_, i) => (i < 40 ? 100 + i : null));
    values[41] = 400;
    const svg = await render(
      <Lines
        id="latency"
        title="Latency"
        starts={hours(44)}
        interval="hour"
        layers={[{ label: "p95", tone: "p95", values }]}
        short={duration}
        full={duration}
        summary="p95 400 ms."
      />,
    );
    const d = /<g class="line tone-p95"><path d="([^"]+)"/.exec(svg)?.[1] ?? "";
    // 40 joined points are one line; 400 stands alone (a move without a line draws nothing), so it gets a mark.
    expect(d.match(/M/g)).toHaveLength(2);
    expect(svg.match(/class="mark"/g)).toHaveLength(1);
    expect(svg).toContain("<title>Nov 25, 16:00 UTC: p95 –</title>");
    expect(svg).toContain(">400 ms<");
  });

  it("labels its value axis in one unit: seconds up to 100 s, not '75 s' beside '1.7 min'", async () => {
    const svg = await render(
      <Lines
        id="latency"
        title="Latency"
        starts={hours(2)}
        interval="hour"
        layers={[{ label: "p99", tone: "p99", values: [62_000, 90_000] }]}
        short={duration}
        axis={durationAxis}
        full={duration}
        summary="p99 90 s."
      />,
    );
    const labels = [...svg.matchAll(/<text x="[\d.]+" y="[\d.]+" dy="0.32em" text-anchor="end">([^<]+)</g)].map(
      (m) => m[1],
    );
    expect(labels.length).toBeGreaterThan(2);
    for (const label of labels) expect(label).toMatch(/^\d+(\.\d+)? s$/);
    expect(labels).toContain("100 s");
    expect(durationAxis(800)(250)).toBe("250 ms");
    expect(durationAxis(600_000)(90_000)).toBe("1.5 min");
    expect(durationAxis(5_000)(2_500)).toBe("2.5 s");
  });

  it("keeps equal percentiles visible: each its own mark, widest drawn first, at low volume every point", async () => {
    const svg = await render(
      <Lines
        id="latency"
        title="Latency"
        starts={hours(3)}
        interval="hour"
        layers={[
          { label: "p50", tone: "p50", values: [120, null, 80] },
          { label: "p95", tone: "p95", values: [300, null, 80] },
          { label: "p99", tone: "p99", values: [300, null, 80] },
        ]}
        short={duration}
        full={duration}
        summary=""
      />,
    );
    // p99 first (a broad band and a ring), then p95 (a square), then p50 on top (a dot).
    const groups = [...svg.matchAll(/<g class="line tone-(p\d\d)">(.*?)<\/g>/g)];
    expect(groups.map((g) => g[1])).toEqual(["p99", "p95", "p50"]);
    const marks = groups.map((g) => [...g[2]!.matchAll(/<(circle|rect) class="mark"([^>]*)>/g)]);
    expect(marks.map((m) => m.length)).toEqual([2, 2, 2]);
    expect(marks[0]![0]![2]).toContain('r="6.5"');
    expect(marks[1]![0]![1]).toBe("rect");
    expect(marks[2]![0]![2]).toContain('r="2.5"');
    // p95 and p99 are one value at the first hour: their marks are at one place, one around the other.
    const centre = (m: RegExpMatchArray) =>
      /cy="([^"]+)"/.exec(m[2]!)?.[1] ?? String(Number(/y="([^"]+)"/.exec(m[2]!)![1]) + 4);
    expect(centre(marks[0]![0]!)).toBe(centre(marks[1]![0]!));
  });
});

describe("errors visible at any scale", () => {
  it("draws a non-zero figure at least MIN_SEGMENT high, taking it from the tallest part", () => {
    const [ok, bad] = segmentHeights([1000, 2], 1000, 166);
    expect(bad).toBe(MIN_SEGMENT);
    expect(ok! + bad!).toBeCloseTo((1002 / 1000) * 166);
    expect(segmentHeights([0, 0], 10, 166)).toEqual([0, 0]);
  });

  it("shows two failed runs beside a thousand good ones, in the chart and in a sparkline", async () => {
    const svg = await render(
      <StackedBars
        id="r"
        title="Runs"
        starts={hours(2)}
        interval="hour"
        layers={[
          { label: "2xx", tone: "c2xx", values: [1000, 0] },
          { label: "5xx", tone: "c5xx", values: [2, 1] },
        ]}
        short={String}
        full={count}
        summary=""
      />,
    );
    expect(attrs(svg, "rect", "tone-c5xx").map((r) => Number(r.height))).toEqual([MIN_SEGMENT, MIN_SEGMENT]);
    const spark = await render(<Sparkline ok={[500, 0]} failed={[1, 0]} label="500 runs, 1 error" />);
    expect(Number(attrs(spark, "rect", "tone-c5xx")[0]!.height)).toBeGreaterThanOrEqual(2);
  });
});

describe("a chart without figures", () => {
  it("says so instead of drawing an empty axis alone", async () => {
    const svg = await render(
      <Lines
        id="l"
        title="Latency"
        starts={hours(3)}
        interval="hour"
        layers={[{ label: "p50", tone: "p50", values: [null, null, null] }]}
        short={duration}
        full={duration}
        summary=""
      />,
    );
    expect(svg).toContain(">No figures for this range</text>");
    expect(svg).not.toContain("<path");
  });
});

describe("figures for people", () => {
  it("says how long ago, and no fresher than a time written once a minute can tell", () => {
    const now = Date.parse("2026-11-25T12:00:00Z");
    const before = (ms: number) => new Date(now - ms).toISOString();
    expect(
      [before(20_000), before(5 * 60_000), before(3 * 3_600_000), before(3 * 86_400_000)].map((t) => ago(t, now)),
    ).toEqual(["just now", "5 min ago", "3 h ago", "3 days ago"]);
    expect(ago(before(20_000), now, 60_000)).toBe("in the last minute");
    expect(ago(before(90_000), now, 60_000)).toBe("1 min ago");
  });

  it("formats counts, durations, bytes and shares", () => {
    expect(count(1234567)).toBe("1,234,567");
    expect([
      duration(0.4),
      duration(999),
      duration(1000),
      duration(1234),
      duration(12_345),
      duration(240_000),
      duration(null),
    ]).toEqual(["0 ms", "999 ms", "1 s", "1.23 s", "12.3 s", "4 min", "–"]);
    expect([bytes(999), bytes(1500), bytes(2_000_000), bytes(12_345_678)]).toEqual([
      "999 B",
      "1.5 kB",
      "2.0 MB",
      "12 MB",
    ]);
    expect([percent(0), percent(0.004), percent(0.125), percent(1)]).toEqual(["0 %", "0.4 %", "13 %", "100 %"]);
  });
});
