/**
 * A retention purge in slices, for any store: which step to run next is a pure function of what the
 * steps did so far and the invocation's budget (`nextStep`), and the store runs the step (`drain` calls
 * it). A D1 cron uses it today; a Durable Object's alarm can call the same two with its own steps.
 *
 * A step removes at most `rows` rows per slice, oldest first, in one transaction: a slice that removes
 * fewer has caught up. Slices are small and one at a time, so a store with one writer (D1, a Durable
 * Object) serves the live writes queued behind a slice before the next one.
 */

/** One store's removal of its expired rows, `rows` at most per call. */
export interface PurgeStep {
  readonly name: string;
  /** Subrequests one slice may make at most (D1 round trips, R2 calls), for the budget. */
  readonly subrequests: number;
  /** Removes up to `rows` expired rows; says how many it removed. */
  slice(rows: number): Promise<number>;
}

export interface PurgeBudget {
  /** Rows per slice: the longest a slice holds the store's one writer. */
  rows: number;
  /** Subrequests the invocation may spend on the purge. */
  subrequests: number;
  /** Wall time the invocation may spend on the purge. */
  wallMs: number;
}

export interface PurgeProgress {
  /** Rows removed per step. */
  removed: Record<string, number>;
  /** Slices run per step. */
  slices: Record<string, number>;
  /** Steps whose last slice removed fewer than a slice's rows. */
  caughtUp: ReadonlySet<string>;
  /** Subrequests spent so far (each step's bound per slice). */
  subrequests: number;
  elapsedMs: number;
}

/**
 * The step to run next: of the steps that have not caught up, the one that ran the fewest slices (in
 * turn, so one store's backlog never starves another's; on a tie the first listed, so a step that
 * prepares another's rows goes first), if one more of its slices fits the budget; null when done.
 */
export function nextStep<S extends Pick<PurgeStep, "name" | "subrequests">>(
  steps: readonly S[],
  progress: PurgeProgress,
  budget: PurgeBudget,
): S | null {
  if (progress.elapsedMs >= budget.wallMs) return null;
  let step: S | null = null;
  for (const s of steps) {
    if (progress.caughtUp.has(s.name)) continue;
    if (!step || (progress.slices[s.name] ?? 0) < (progress.slices[step.name] ?? 0)) step = s;
  }
  if (!step || progress.subrequests + step.subrequests > budget.subrequests) return null;
  return step;
}

/** Runs slices until every step has caught up or the budget is spent; what it removed, and whether it caught up. */
export async function drain(
  steps: readonly PurgeStep[],
  budget: PurgeBudget,
  now: () => number,
): Promise<PurgeProgress & { done: boolean }> {
  const started = now();
  const removed: Record<string, number> = Object.fromEntries(steps.map((s) => [s.name, 0]));
  const slices: Record<string, number> = Object.fromEntries(steps.map((s) => [s.name, 0]));
  const caughtUp = new Set<string>();
  let subrequests = 0;
  for (;;) {
    const progress = { removed, slices, caughtUp, subrequests, elapsedMs: now() - started };
    const step = nextStep(steps, progress, budget);
    if (!step) return { ...progress, done: caughtUp.size === steps.length };
    const n = await step.slice(budget.rows);
    subrequests += step.subrequests;
    removed[step.name] = (removed[step.name] ?? 0) + n;
    slices[step.name] = (slices[step.name] ?? 0) + 1;
    if (n < budget.rows) caughtUp.add(step.name);
  }
}
