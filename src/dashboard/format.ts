/**
 * Figures as people read them: "1,234 runs", "12.3K", "240 ms", "1.2 s", "3.4 MB", "2.5 %". One place,
 * so a chart's axis, its table and the page's totals never disagree about a number.
 */

const whole = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });

/** A count in full, with thousands separators: tables and totals. */
export const count = (n: number) => whole.format(n);

/** A count on an axis: 950, 1.2K, 3.4M. */
export const countShort = (n: number) => compact.format(n);

/** A duration: whole milliseconds under a second, then seconds with one decimal, minutes past 100 s. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 100_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1).replace(/\.?0+$/, "")} s`;
  return `${(ms / 60_000).toFixed(1).replace(/\.0$/, "")} min`;
}

const trimmed = (n: number, digits: number) => n.toFixed(digits).replace(/\.?0+$/, "");

/**
 * An axis of durations in one unit, the one its top value reads best in: ms under a second, seconds
 * under 5 minutes, then minutes. Every label of the axis has it ("0 s, 25 s, 50 s, 75 s, 100 s").
 */
export function durationAxis(top: number): (ms: number) => string {
  if (top < 1000) return (ms) => `${Math.round(ms)} ms`;
  if (top < 300_000) return (ms) => `${trimmed(ms / 1000, 2)} s`;
  return (ms) => `${trimmed(ms / 60_000, 1)} min`;
}

const BYTE_UNITS = ["B", "kB", "MB", "GB", "TB"] as const;

/** Bytes in SI units (1 kB = 1000 B), as the network speaks of transfer. */
export function bytes(n: number): string {
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < BYTE_UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${BYTE_UNITS[unit]}`;
}

/** A share (0..1) as a percentage: "0 %", "0.4 %", "12 %", "100 %". */
export function percent(share: number): string {
  const p = share * 100;
  if (p === 0 || p === 100) return `${p} %`;
  return `${p < 10 ? p.toFixed(1) : p.toFixed(0)} %`;
}

/**
 * How long ago `iso` was, as people say it ("just now", "4 min ago", "3 h ago", "2 days ago"); `within`
 * is how fresh the figure can be at best: a time written at most once a minute says "in the last minute".
 */
export function ago(iso: string, now: number, within = 0): string {
  const ms = Math.max(0, now - Date.parse(iso));
  if (ms < Math.max(within, 60_000)) return within > 0 ? "in the last minute" : "just now";
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ago`;
  if (ms < 48 * 3_600_000) return `${Math.floor(ms / 3_600_000)} h ago`;
  return `${Math.floor(ms / 86_400_000)} days ago`;
}
