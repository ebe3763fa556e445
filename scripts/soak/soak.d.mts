// Types of soak.mjs for the Node test that runs a small soak.
import type { Miniflare } from "miniflare";

export interface SoakGateway {
  mf: Miniflare;
  db: unknown;
  url: string;
}

export interface SoakResult {
  runs: number;
  concurrency: number;
  runsPerSecond: number;
  runsSeconds: number;
  /** From the last run's answer until no delivery was pending (or the settle window ran out). */
  drainSeconds: number;
  /** The longest gap between the end of one attempt and the start of the next, over every delivery. */
  longestGapMs: number;
  callerStatuses: Record<string, number>;
  records: number;
  tally: { delivered: number; failed: number; pending: number };
  attemptsHistogram: Record<string, number>;
  attemptsTotal: number;
  /** Deliveries whose attempts the machine's load disturbed (a timeout the receiver did not mean): held to the outcome table over the recorded attempts. */
  disturbedByLoad: number;
  refusedRuns: number;
  workerLogLines: Record<string, number>;
  violations: string[];
}

export function startSoakGateway(bundle: string): Promise<SoakGateway>;
export function soak(options: {
  gateway: SoakGateway;
  runs: number;
  concurrency?: number;
  settleTimeoutMs?: number;
  log?: (...args: unknown[]) => void;
}): Promise<SoakResult>;

/** `wrangler deploy --dry-run` of the local configuration into `outdir`; the bundle's path. */
export function buildBundle(outdir: string): string;
