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
 * Subrequests one attempt may make at worst (fetch, D1, R2 all count): its POST, an R2 read of its body
 * (read again at each attempt: a delivery between attempts holds nothing), its claim and the read after
 * a refused one, its outcome write tried twice.
 */
export const SUBREQUESTS_PER_ATTEMPT = 1 + 1 + 1 + 1 + 2;
/**
 * Subrequests one lane invocation (an alarm) may make: 10,000, Workers Paid's limit on today's limits
 * page (its former one was 1,000). A lane starts at most this ÷ SUBREQUESTS_PER_ATTEMPT attempts (1,666)
 * in one alarm, then leaves the rest of its backlog to a fresh alarm, beside one D1 read of its
 * receiver's settings. An alarm opens first attempts only while what is left covers three for each
 * delivery under way (lane-plan.ts `alarmBudget`): at the former 166 a receiver that asks for retries
 * keeps a hundred or more under way, and its lane made only retries (the burst figures in
 * docs/benchmarks.md). On Workers Free (50) set it to 50: 8 per alarm, for a receiver that rarely retries.
 */
export const LANE_SUBREQUESTS_PER_INVOCATION = 10_000;
/** Attempts one lane alarm starts before it leaves the rest to the next alarm (one subrequest kept for the settings' read). */
export const ATTEMPTS_PER_LANE_INVOCATION = Math.floor((LANE_SUBREQUESTS_PER_INVOCATION - 1) / SUBREQUESTS_PER_ATTEMPT);
/**
 * Wall time after which a lane alarm starts no new attempt (alarms may run 15 minutes). Its attempts in
 * flight finish (≤ 10 s each), then the next alarm takes the backlog and the retries due.
 */
export const LANE_INVOCATION_WALL_MS = 10 * 60 * 1000;
/** Subrequests the queue consumer makes per message at worst (every message of the batch to a lane of its own): one `accept`. */
export const SUBREQUESTS_PER_ACCEPT = 1;
