import type { Child } from "hono/jsx";

/**
 * Charts as server-rendered SVG: pure functions of a series, readable without script, styled by the
 * dashboard's stylesheet (classes, no inline style: the CSP allows none). Each chart is a `<figure>`
 * with its caption, a legend in words, the SVG (an image named by its caption and a one-line summary,
 * each bucket with a native tooltip) and the same figures as a table for screen readers and for
 * reading exact values.
 */

export type Interval = "minute" | "hour" | "day";
export const INTERVAL_MS: Record<Interval, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };

/** A colour of the stylesheet (`.tone-…`): status classes (and the gateway's failures) for bars, percentiles for lines. */
export type Tone = "c2xx" | "c4xx" | "c5xx" | "cgw" | "p50" | "p95" | "p99";

export interface Layer {
  label: string;
  tone: Tone;
  /** One value per bucket; null where there is nothing to show (a percentile of no runs). */
  values: (number | null)[];
}

export interface ChartProps {
  id: string;
  title: string;
  /** The buckets' starts, epoch milliseconds, oldest first, one per `interval`. */
  starts: number[];
  interval: Interval;
  layers: Layer[];
  /** A value on the axis (short) and in tooltips and the table (full). */
  short: (n: number) => string;
  /**
   * The axis's labels in one unit, chosen for its top value (`durationAxis`: "0 s … 100 s", never
   * "75 s" beside "1.7 min"); `short` without it.
   */
  axis?: (top: number) => (n: number) => string;
  full: (n: number) => string;
  /** One sentence for the image's description: what the chart says at a glance. */
  summary: string;
}

// The drawing's own units; the SVG scales to the width of its column.
const W = 480;
const H = 200;
const M = { left: 60, right: 8, top: 10, bottom: 24 };
const PLOT_W = W - M.left - M.right;
const PLOT_H = H - M.top - M.bottom;
/** Half the width of one character of an axis label, generously (the stylesheet sets 14 units on phones). */
const LABEL_CHAR_W = 4.5;

/**
 * 0, a round step and its multiples up to at least `max`: 0–4 gridlines a person can read. Counts
 * (`whole`) step by whole numbers: one delivery is not read off an axis of 0.25s (labelled 0.3).
 */
export function niceTicks(max: number, whole = false): number[] {
  if (!(max > 0)) return [0, 1];
  const rough = max / 4;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const steps = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).filter((s) => !whole || (Number.isInteger(s) && s >= 1));
  const step = steps.find((s) => s >= rough) ?? (whole ? Math.max(1, 10 * magnitude) : 10 * magnitude);
  const ticks: number[] = [];
  for (let t = 0; t < max + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  if (ticks[ticks.length - 1]! < max) ticks.push(Number((ticks.length * step).toPrecision(12)));
  return ticks;
}

/** Bucket strides per interval that land on round times (every 10 min, every 6 h, every day). */
const STRIDES: Record<Interval, number[]> = {
  minute: [1, 2, 5, 10, 15, 30, 60, 120, 360],
  hour: [1, 2, 3, 4, 6, 12, 24, 48, 168],
  day: [1, 2, 7, 14, 28],
};
const MAX_LABELS = 7;

const pad = (n: number) => String(n).padStart(2, "0");
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const dayLabel = (d: Date) => `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`;
const clockLabel = (d: Date) => `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;

/** A bucket's start in words (UTC), as tooltips and the table say it. */
export function bucketLabel(start: number, interval: Interval): string {
  const d = new Date(start);
  return interval === "day" ? dayLabel(d) : `${dayLabel(d)}, ${clockLabel(d)}`;
}

/** Which buckets carry a label on the time axis, and what it says: round times, at most 7. */
export function timeTicks(starts: number[], interval: Interval): { index: number; label: string }[] {
  const unit = INTERVAL_MS[interval];
  const stride = STRIDES[interval].find((s) => starts.length / s <= MAX_LABELS) ?? STRIDES[interval].at(-1)!;
  const byDay = interval === "day" || stride * unit >= INTERVAL_MS.day;
  return starts.flatMap((start, index) => {
    if (Math.floor(start / unit) % stride !== 0) return [];
    const d = new Date(start);
    return [{ index, label: byDay ? dayLabel(d) : clockLabel(d) }];
  });
}

const fmt = (n: number) => Number(n.toFixed(2)); // fewer bytes of SVG, no visible difference

function Frame(props: ChartProps & { max: number; whole?: boolean; children: Child }) {
  const ticks = niceTicks(props.max, props.whole);
  const top = ticks[ticks.length - 1]!;
  const label = props.axis ? props.axis(top) : props.short;
  const y = (v: number) => fmt(M.top + PLOT_H - (v / top) * PLOT_H);
  const band = PLOT_W / Math.max(props.starts.length, 1);
  return (
    <figure class="chart" id={props.id}>
      <figcaption id={`${props.id}-title`}>{props.title}</figcaption>
      <ul class="legend">
        {props.layers.map((l) => (
          <li>
            <span class={`swatch tone-${l.tone}`} aria-hidden="true"></span>
            {l.label}
          </li>
        ))}
      </ul>
      <svg
        viewBox={`0 0 ${W} ${H}`}
        role="img"
        aria-labelledby={`${props.id}-title ${props.id}-desc`}
        preserveAspectRatio="xMidYMid meet"
      >
        <desc id={`${props.id}-desc`}>{props.summary}</desc>
        <g class="grid">
          {ticks.map((t) => (
            <>
              <line x1={M.left} x2={W - M.right} y1={y(t)} y2={y(t)} />
              <text x={M.left - 6} y={y(t)} dy="0.32em" text-anchor="end">
                {label(t)}
              </text>
            </>
          ))}
        </g>
        <g class="axis">
          {timeTicks(props.starts, props.interval).map((t) => {
            // Centred under its bucket, but kept inside the drawing (a label at either end would be cut off).
            const half = t.label.length * LABEL_CHAR_W;
            const x = Math.min(Math.max(M.left + (t.index + 0.5) * band, M.left + half), W - half);
            return (
              <text x={fmt(x)} y={H - 6} text-anchor="middle">
                {t.label}
              </text>
            );
          })}
        </g>
        {props.children}
      </svg>
      <FiguresTable {...props} />
    </figure>
  );
}

/** The chart's figures, one row per bucket, behind a disclosure (and read by screen readers). */
function FiguresTable(props: ChartProps) {
  return (
    <details>
      <summary>
        Figures as a table<span class="skip"> ({props.title})</span>
      </summary>
      <div class="table-wrap">
        <table class="figures">
          <caption class="skip">{props.title}</caption>
          <thead>
            <tr>
              <th scope="col">Time (UTC)</th>
              {props.layers.map((l) => (
                <th scope="col">{l.label}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {props.starts.map((start, i) => (
              <tr>
                <th scope="row">{bucketLabel(start, props.interval)}</th>
                {props.layers.map((l) => {
                  const v = l.values[i];
                  return <td>{v === null || v === undefined ? "–" : props.full(v)}</td>;
                })}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </details>
  );
}

/** A bucket's tooltip: its time and each layer's value. */
const tooltip = (props: ChartProps, i: number) =>
  `${bucketLabel(props.starts[i]!, props.interval)} UTC: ${props.layers.map((l) => `${l.label} ${l.values[i] === null || l.values[i] === undefined ? "–" : props.full(l.values[i]!)}`).join(", ")}`;

/**
 * The least height a non-zero figure is drawn with, in the drawing's units (a plot is 166 high): two
 * failed runs beside a thousand good ones stay a visible sliver, not a hairline nobody sees.
 */
export const MIN_SEGMENT = 3;

/**
 * Each layer's segment height for one bucket, stacked in `room`: in proportion to `top`, but a non-zero
 * value never thinner than `min`; what that adds is taken from the tallest segment, so the stack
 * still ends where its total does.
 */
export function segmentHeights(values: number[], top: number, room: number, min = MIN_SEGMENT): number[] {
  const heights = values.map((v) => (v > 0 ? Math.max((v / top) * room, min) : 0));
  const total = values.reduce((sum, v) => sum + Math.max(v, 0), 0);
  const over = heights.reduce((sum, h) => sum + h, 0) - (total / top) * room;
  if (over > 0) {
    const tallest = heights.indexOf(Math.max(...heights));
    heights[tallest] = Math.max(heights[tallest]! - over, min);
  }
  return heights;
}

/** Stacked bars: one bar per bucket, the layers stacked bottom to top (runs by status class). */
export function StackedBars(props: ChartProps) {
  const totals = props.starts.map((_, i) => props.layers.reduce((sum, l) => sum + (l.values[i] ?? 0), 0));
  const max = Math.max(0, ...totals);
  const top = niceTicks(max, true).at(-1)!;
  const band = PLOT_W / Math.max(props.starts.length, 1);
  const width = fmt(Math.max(band * 0.78, Math.min(band, 1)));
  return (
    <Frame {...props} max={max} whole>
      <g class="bars">
        {props.starts.map((_, i) => {
          let base = M.top + PLOT_H;
          const x = fmt(M.left + i * band + (band - width) / 2);
          const heights = segmentHeights(
            props.layers.map((l) => l.values[i] ?? 0),
            top,
            PLOT_H,
          );
          return (
            <g>
              <title>{tooltip(props, i)}</title>
              <rect class="hit" x={fmt(M.left + i * band)} y={M.top} width={fmt(band)} height={PLOT_H} />
              {props.layers.map((l, k) => {
                const h = heights[k]!;
                if (h <= 0) return null;
                base -= h;
                return <rect class={`tone-${l.tone}`} x={x} y={fmt(base)} width={width} height={fmt(h)} />;
              })}
            </g>
          );
        })}
      </g>
    </Frame>
  );
}

/** Markers of each percentile, told apart by shape and size, so equal values stay visible one around another. */
function Marker({ tone, cx, cy }: { tone: Tone; cx: number; cy: number }) {
  if (tone === "p99") return <circle class="mark" cx={cx} cy={cy} r="6.5" />;
  if (tone === "p95") return <rect class="mark" x={fmt(cx - 4)} y={fmt(cy - 4)} width="8" height="8" />;
  return <circle class="mark" cx={cx} cy={cy} r="2.5" />;
}

/** Up to this many points with a value, every point gets its marker (low volume); beyond, only lone points. */
const MARK_EVERY_POINT_UP_TO = 36;

/**
 * Lines, one per layer (latency percentiles); a bucket without a value breaks its line. Layers are drawn
 * widest first (p99 a broad band, p95 dashed, p50 thin and solid on top) and their points marked with
 * shapes of different sizes (a ring, a square, a dot), so where p95 equals p99, or all three are one
 * value, each stays visible rather than one hiding the others.
 */
export function Lines(props: ChartProps) {
  const max = Math.max(0, ...props.layers.flatMap((l) => l.values.filter((v): v is number => v !== null)));
  const top = niceTicks(max).at(-1)!;
  const band = PLOT_W / Math.max(props.starts.length, 1);
  const x = (i: number) => fmt(M.left + (i + 0.5) * band);
  const y = (v: number) => fmt(M.top + PLOT_H - (v / top) * PLOT_H);
  const empty = props.layers.every((l) => l.values.every((v) => v === null));
  const points = Math.max(0, ...props.layers.map((l) => l.values.filter((v) => v !== null).length));
  const markAll = points <= MARK_EVERY_POINT_UP_TO;
  // Widest first: the later (narrower) layers are drawn over it.
  const order = [...props.layers].reverse();
  return (
    <Frame {...props} max={max}>
      {empty && (
        <text class="empty" x={M.left + PLOT_W / 2} y={M.top + PLOT_H / 2} text-anchor="middle">
          No figures for this range
        </text>
      )}
      {order.map((l) => {
        let d = "";
        const marked: number[] = [];
        l.values.forEach((v, i) => {
          if (v === null) return;
          const starts = i === 0 || l.values[i - 1] === null;
          d += `${starts ? "M" : "L"}${x(i)} ${y(v)}`;
          const lone = starts && (i === l.values.length - 1 || l.values[i + 1] === null);
          if (markAll || lone) marked.push(i);
        });
        return (
          <g class={`line tone-${l.tone}`}>
            {d && <path d={d} />}
            {marked.map((i) => (
              <Marker tone={l.tone} cx={x(i)} cy={y(l.values[i]!)} />
            ))}
          </g>
        );
      })}
      <g class="hits">
        {props.starts.map((_, i) => (
          <rect class="hit" x={fmt(M.left + i * band)} y={M.top} width={fmt(band)} height={PLOT_H}>
            <title>{tooltip(props, i)}</title>
          </rect>
        ))}
      </g>
    </Frame>
  );
}

/**
 * A chart the size of a word, for a row of a list: one bar per bucket, failures (the second layer)
 * stacked in their colour on top, each non-zero part at least two units high so one failed run shows.
 * An image named by `label`; the figures stay beside it in words.
 */
export function Sparkline({ ok, failed, label }: { ok: number[]; failed: number[]; label: string }) {
  const w = 96;
  const h = 24;
  const max = Math.max(1, ...ok.map((v, i) => v + (failed[i] ?? 0)));
  const band = w / Math.max(ok.length, 1);
  const width = fmt(Math.max(band * 0.75, 1.5));
  return (
    <svg class="spark" viewBox={`0 0 ${w} ${h}`} role="img" aria-label={label}>
      <title>{label}</title>
      <line class="base" x1="0" x2={w} y1={h - 0.5} y2={h - 0.5} />
      {ok.map((v, i) => {
        const x = fmt(i * band + (band - Number(width)) / 2);
        const [okH, badH] = segmentHeights([v, failed[i] ?? 0], max, h, 2) as [number, number];
        return (
          <>
            {okH > 0 && <rect class="tone-c2xx" x={x} y={fmt(h - okH)} width={width} height={fmt(okH)} />}
            {badH > 0 && <rect class="tone-c5xx" x={x} y={fmt(h - okH - badH)} width={width} height={fmt(badH)} />}
          </>
        );
      })}
    </svg>
  );
}
