/**
 * What one lane (lane.ts: a Durable Object per project and receiver origin) may hold and do at once.
 * A Durable Object's invocation has the Workers limits: 6 simultaneous open outbound connections (more
 * wait inside the runtime, where an attempt's timeout would already be running), 128 MB per isolate,
 * a subrequest limit per invocation. These constants keep a lane within them by construction, whatever
 * its backlog holds. docs/webhooks.md has the arithmetic.
 */

/**
 * Requests in flight at once in one lane object (one connection each; a delivery between attempts holds
 * none): what one invocation may hold open, and a receiver's concurrency when its customer set none.
 */
export const LANE_CONCURRENCY = 6;
/**
 * The most requests in flight a customer may allow one receiver (origin). Above LANE_CONCURRENCY its
 * deliveries are spread over ⌈concurrency ÷ 6⌉ shards of its lane (lane.ts), each its own object. Every
 * delivery still enters through the receiver's first lane (one `accept` each), which Durable Objects'
 * soft limit of about 1,000 requests a second bounds: 30 in flight at ≥ 30 ms an attempt stays within it.
 */
export const MAX_RECEIVER_CONCURRENCY = 30;
/**
 * Body bytes held at once per lane. A delivery holds its body once (signing reuses the buffer) and the
 * runtime may hold a second and third copy while sending and hashing: worst case 3 × this = 72 MiB of
 * bodies, beside the isolate's own few MB, under the 128 MB limit. Two deliveries of the largest body
 * (a 10 MiB answer in its envelope) fit at once.
 */
export const BODY_BUDGET_BYTES = 24 * 1024 * 1024;

/**
 * The bytes one lane object keeps (its SQLite database: a row per delivery not settled, its body inline
 * up to 64 KiB, a reference to R2 past it). A Durable Object holds at most 10 GB; a receiver that takes
 * deliveries slower than they come (it answers, slowly) would fill it. Past this bound the lane refuses
 * new deliveries (`Accepted.refused`) and its consumer settles each `failed` (`receiver_backlog_full`), to be
 * recovered by the customer once the backlog has drained. 1 GiB is 16,000 deliveries of the largest
 * inline body, about a million of 1 KiB: at the receiver's bound (6 ÷ 50 ms) some two hours of backlog.
 */
export const LANE_BYTES_MAX = 1024 * 1024 * 1024;
/**
 * A lane's answer to `accept`: for each message whether it was stored now (false: it was there already),
 * and, when an object was full, which messages it refused (stored nowhere).
 */
export interface Accepted {
  stored: boolean[];
  refused?: boolean[];
}

/** Deliveries a full lane refused (`acceptInLane`), by their index in the call. */
export class LaneFullError extends Error {
  constructor(readonly refused: boolean[]) {
    super(`webhook lane full: ${refused.filter(Boolean).length} deliveries refused (LANE_BYTES_MAX)`);
    this.name = "LaneFullError";
  }
}

/**
 * Subrequests one attempt itself may make at worst (fetch, D1, R2 all count): its POST, an R2 read of
 * its body (read again at each attempt: a delivery between attempts holds nothing), its claim and the
 * read after a refused one, its outcome write tried twice.
 */
export const SUBREQUESTS_OF_ATTEMPT = 1 + 1 + 1 + 1 + 2;
/**
 * What comes with an attempt may add at worst. Before it: its receiver's state read, and the delivery
 * held when the receiver is stopped (receiver-controls.ts `holdIfStopped`). After it (receiver-stops.ts
 * `afterAttempt`): a receiver that said stop disabled (its write, its audit entry, the call that tells
 * its lanes) and the alert of it (the project's settings, the alert's record, its lane's `accept`, the
 * queue when that fails), the receiver's state settled (a read and a write), then its automatic
 * recovery (the settings, a select, the running task, the task's creation and its start) or, for a
 * failed delivery, its alert (four, as above).
 */
export const SUBREQUESTS_AROUND_ATTEMPT = 2 + (3 + 4) + 2 + Math.max(5, 4);
/** An attempt's worst case, what the lane's alarm keeps for each attempt it starts or has in flight. */
export const SUBREQUESTS_PER_ATTEMPT = SUBREQUESTS_OF_ATTEMPT + SUBREQUESTS_AROUND_ATTEMPT;
/**
 * Subrequests one lane invocation (an alarm) may make: 10,000, Workers Paid's limit on today's limits
 * page (its former one was 1,000). The alarm counts the subrequests it really makes (a `SubrequestMeter`
 * on its bindings and outbound fetch) and starts an attempt only while what is left covers the worst
 * case of it and of every attempt in flight (`attemptsLeft` in lane.ts), beside one D1 read of its
 * receiver's settings. An alarm opens first attempts only while what is left covers three for each
 * delivery under way (lane-plan.ts `alarmBudget`). Measured in the burst (docs/benchmarks.md): an
 * attempt costs about 1.4 subrequests (its POST and its share of the group commit's D1 trips), so an
 * alarm makes thousands of attempts where the worst case allows 499; each alarm's end costs a receiver
 * that asks for retries some 300 ms of idle slots (docs/webhooks.md, "An alarm's end"). On Workers
 * Free (50) set it to 50: two attempts at worst per alarm, more as they are counted, for a receiver
 * that rarely retries.
 */
export const LANE_SUBREQUESTS_PER_INVOCATION = 10_000;
/** The fewest attempts an alarm is sure to start, every one at its worst case (one subrequest kept for the settings' read). */
export const ATTEMPTS_PER_LANE_INVOCATION = Math.floor((LANE_SUBREQUESTS_PER_INVOCATION - 1) / SUBREQUESTS_PER_ATTEMPT);
/**
 * Wall time after which a lane alarm starts no new attempt (alarms may run 15 minutes). Its attempts in
 * flight finish (≤ 10 s each), then the next alarm takes the backlog and the retries due.
 */
export const LANE_INVOCATION_WALL_MS = 10 * 60 * 1000;
/** Subrequests the queue consumer makes per message at worst (every message of the batch to a lane of its own): one `accept`. */
export const SUBREQUESTS_PER_ACCEPT = 1;
