/**
 * Latency percentiles. From records: nearest rank over the sorted durations, exact. From rollups: a
 * histogram of log-spaced buckets (each 5 % wider than the one before), which merges by adding and
 * answers within 5 % of the true value (a bucket reports its upper bound).
 */

/** Bucket index → count. */
export type Histogram = Record<string, number>;

const GROWTH = 1.05;
const LOG_GROWTH = Math.log(GROWTH);

const bucketOf = (ms: number) => (ms <= 1 ? 0 : Math.ceil(Math.log(ms) / LOG_GROWTH));
const upperBoundOf = (bucket: number) => Math.round(GROWTH ** bucket);

export function addToHistogram(h: Histogram, ms: number): void {
  const key = String(bucketOf(Math.max(0, ms)));
  h[key] = (h[key] ?? 0) + 1;
}

/** Adds `from` into `into` and returns it. */
export function mergeHistograms(into: Histogram, from: Histogram): Histogram {
  for (const [key, n] of Object.entries(from)) into[key] = (into[key] ?? 0) + n;
  return into;
}

/** The nearest-rank percentile `p` of ascending `sorted`; null when empty. */
export function percentileOfSorted(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** The percentile `p` of a histogram: the upper bound of the bucket holding the nearest rank; null when empty. */
export function percentileOf(h: Histogram, p: number): number | null {
  const buckets = Object.entries(h)
    .map(([key, n]) => [Number(key), n] as const)
    .sort((a, b) => a[0] - b[0]);
  const total = buckets.reduce((sum, [, n]) => sum + n, 0);
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * total));
  let seen = 0;
  for (const [bucket, n] of buckets) {
    seen += n;
    if (seen >= rank) return upperBoundOf(bucket);
  }
  return upperBoundOf(buckets.at(-1)![0]);
}
