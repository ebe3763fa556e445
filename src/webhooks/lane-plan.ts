/**
 * Whether a lane may start a first attempt now without making a retry late: the lane's scheduling rule
 * as a pure function (docs/webhooks.md, "Retries before first attempts"). Pure: no Workers imports.
 *
 * A retry is owed a slot between its time (`dueAt`) and its latest start (`latestAt`: the end of the
 * attempt before it plus the gap the spec allows, less a margin). Retries go first; a first attempt
 * takes a free slot only if, with every attempt in flight (and this one) holding its slot for the
 * longest the lane plans for (`holdMs`) and each of them possibly ending in a retry of its own, every
 * retry still finds a slot in time when the slots serve retries earliest-deadline first.
 */

/** A delivery between attempts: its next one due at `dueAt`, to start by `latestAt` (wall clock, ms). */
export interface OwedRetry {
  dueAt: number;
  latestAt: number;
}

/** An attempt in flight since `startedAt`; `mayRetry` when it is not its delivery's last. */
export interface AttemptInFlight {
  startedAt: number;
  mayRetry: boolean;
}

export interface LaneState {
  now: number;
  /** Requests the lane may have in flight at once. */
  slots: number;
  /** The longest the lane plans for an attempt in flight (or starting now) to hold its slot (claim, request, outcome). */
  holdMs: number;
  /**
   * What the lane plans for each retry not yet started to hold its slot (`holdMs` when not given): the
   * recent holds' typical length rather than their longest, since owed retries are many and their
   * slots' sum, not any one of them, is what keeps or breaks the others' gaps.
   */
  retryHoldMs?: number;
  /** From the end of an attempt to the latest start of its retry (the spec's gap less a margin). */
  gapMs: number;
  inFlight: readonly AttemptInFlight[];
  retries: readonly OwedRetry[];
}

/** Whether every owed retry (those stored and those the attempts in flight may end in) finds a slot in time. */
export function retriesFit(state: LaneState): boolean {
  const { now, holdMs, gapMs } = state;
  const retryHoldMs = state.retryHoldMs ?? holdMs;
  const frees: number[] = state.inFlight.map((a) => Math.max(now, a.startedAt + holdMs));
  if (frees.length > state.slots) return false;
  while (frees.length < state.slots) frees.push(now);
  const owed: OwedRetry[] = [...state.retries];
  for (const a of state.inFlight) {
    if (!a.mayRetry) continue;
    // Its retry may be due as soon as it ends (Retry-After: 0), at the latest when its hold ends.
    const end = Math.max(now, a.startedAt + holdMs);
    owed.push({ dueAt: end, latestAt: end + gapMs });
  }
  owed.sort((a, b) => a.latestAt - b.latestAt || a.dueAt - b.dueAt);
  for (const retry of owed) {
    let slot = 0;
    for (let i = 1; i < frees.length; i++) if (frees[i]! < frees[slot]!) slot = i;
    const start = Math.max(frees[slot]!, retry.dueAt);
    if (start > retry.latestAt) return false;
    frees[slot] = start + retryHoldMs;
  }
  return true;
}

/** Whether a first attempt (`mayRetry`: not the delivery's last) may start now in a free slot. */
export function firstAttemptFits(state: LaneState, mayRetry = true): boolean {
  if (state.inFlight.length >= state.slots) return false;
  return retriesFit({ ...state, inFlight: [...state.inFlight, { startedAt: state.now, mayRetry }] });
}

/**
 * The hold a lane plans for, from the holds of its recent attempts (ms): twice the longest, at least
 * `floorMs`, at most `ceilingMs` (the attempt's timeout and its writes). With no history, or while an
 * attempt in flight has outlived the estimate, the ceiling: a receiver that turns slow stops the lending
 * of slots at once.
 */
export function plannedHold(
  recent: readonly number[],
  oldestInFlightMs: number,
  floorMs: number,
  ceilingMs: number,
): number {
  if (recent.length === 0) return ceilingMs;
  const estimate = Math.min(ceilingMs, Math.max(floorMs, 2 * Math.max(...recent)));
  return oldestInFlightMs > estimate ? ceilingMs : estimate;
}

/**
 * What one alarm may still start, of the `left` attempts its subrequests allow: retries while any is
 * left; first attempts only while what is left covers all MAX_ATTEMPTS of each beside the `owed`
 * attempts of the deliveries under way, and not once the alarm's wall time is past (`wallLeft`). So
 * an alarm near its bound keeps what every retry owed may need, and its end never makes one miss its
 * gap (lane.ts `pump`).
 */
export function alarmBudget(
  left: number,
  owed: number,
  wallLeft: boolean,
  maxAttempts: number,
): { retries: number; firsts: number } {
  const retries = Math.max(0, left);
  return { retries, firsts: wallLeft ? Math.max(0, Math.floor((left - owed) / maxAttempts)) : 0 };
}

/**
 * The hold a lane plans for each retry it owes, from its recent attempts' holds (ms): twice their mean,
 * at least `floorMs`, at most `ceilingMs`; the ceiling with no history.
 */
export function plannedRetryHold(recent: readonly number[], floorMs: number, ceilingMs: number): number {
  if (recent.length === 0) return ceilingMs;
  const mean = recent.reduce((sum, ms) => sum + ms, 0) / recent.length;
  return Math.min(ceilingMs, Math.max(floorMs, 2 * mean));
}

/**
 * The shards of a receiver's lane for its `concurrency`, and each one's share of it: ⌈concurrency ÷
 * perObject⌉ shards, the shares as even as can be (7 → 4 + 3), so that together they never have more
 * than `concurrency` requests in flight and none more than one object may hold open.
 */
export function shardShares(concurrency: number, perObject: number): number[] {
  const n = Math.max(1, Math.ceil(concurrency / perObject));
  return Array.from({ length: n }, (_, k) => Math.floor(concurrency / n) + (k < concurrency % n ? 1 : 0));
}

/** The shard (0 … shards − 1) of a delivery: FNV-1a of its id, mod the number of shards. */
export function shardOf(deliveryId: string, shards: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < deliveryId.length; i++) {
    hash ^= deliveryId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shards;
}
