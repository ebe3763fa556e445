// Types of runs.mjs for the Node test that runs a small runs soak.
export interface RunsSoakResult {
  runs: number;
  lostMeans: string;
  waitApplied: boolean;
  restart: {
    atRun: number;
    inFlightAppCalls: number;
    redelivered: { queued: number; running: number };
    seconds: number;
  } | null;
  sendSeconds: number;
  settleSeconds: number;
  byMode: { sync: number; wait: number; async: number };
  callers: {
    answered: number;
    accepted202: number;
    hungUp: number;
    cutByRestart: number;
    otherErrors: number;
    statuses: Record<string, number>;
  };
  app: { runIds: number; calledTwice: number; indexCalledTwice: number; answeredWhole: number; cut: number };
  stored: { final: number; notFinal: number; byStatus: Record<string, number>; errorCodes: Record<string, number> };
  notCalled: { hungUp: number; cutByRestart: number; deadline: number; other: number };
  lost: number;
  interruptedByRestart: number;
  deadlines: number;
  violations: string[];
}

export const LOST_MEANS: string;

export function soakRuns(options: {
  bundle: string;
  runs?: number;
  concurrency?: number;
  seed?: number;
  restartAt?: number;
  persistDir: string;
  settleTimeoutMs?: number;
  log?: (...args: unknown[]) => void;
}): Promise<RunsSoakResult>;

export function buildBundle(outdir: string): string;
