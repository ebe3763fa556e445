/**
 * What one lane (lane.ts: a Durable Object per project and receiver origin) may hold and do at once.
 * A Durable Object's invocation has the Workers limits: 6 simultaneous open outbound connections (more
 * wait inside the runtime, where an attempt's timeout would already be running), 128 MB per isolate,
 * a subrequest limit per invocation. These constants keep a lane within them by construction, whatever
 * its backlog holds. docs/webhooks.md has the arithmetic.
 */

/**
 * Deliveries in progress at once per lane: each holds one connection at a time, so ≤ 6 connections,
 * and one receiver origin never sees more than 6 requests at once from one project (politeness).
 */
export const LANE_CONCURRENCY = 6;
/**
 * Body bytes held at once per lane. A delivery holds its body once (signing reuses the buffer) and the
 * runtime may hold a second and third copy while sending and hashing: worst case 3 × this = 72 MiB of
 * bodies, beside the isolate's own few MB, under the 128 MB limit. Two deliveries of the largest body
 * (a 10 MiB answer in its envelope) fit at once.
 */
export const BODY_BUDGET_BYTES = 24 * 1024 * 1024;

/**
 * Subrequests one delivery may make at worst (fetch, D1, R2 all count): 3 POSTs, 1 R2 read, 3 claims
 * and the read after a refused one, 3 outcome writes tried twice each.
 */
export const SUBREQUESTS_PER_DELIVERY = 3 + 1 + 3 + 1 + 3 * 2;
/**
 * Subrequests one lane invocation (an alarm) may make: Workers Paid's 1,000 per invocation. A lane
 * starts at most this ÷ SUBREQUESTS_PER_DELIVERY deliveries (71) in one alarm, then leaves the rest of
 * its backlog to a fresh alarm (lane.ts). On Workers Free (50) set it to 50: 3 per alarm.
 */
export const LANE_SUBREQUESTS_PER_INVOCATION = 1000;
/** Deliveries one lane alarm starts before it leaves the rest to the next alarm. */
export const DELIVERIES_PER_LANE_INVOCATION = Math.floor(LANE_SUBREQUESTS_PER_INVOCATION / SUBREQUESTS_PER_DELIVERY);
/**
 * Wall time after which a lane alarm starts no new delivery (alarms may run 15 minutes). Its deliveries
 * in progress finish (≤ 3 × 10 s + 2 × 4 s each), then the next alarm takes the backlog.
 */
export const LANE_INVOCATION_WALL_MS = 10 * 60 * 1000;
/** Subrequests the queue consumer makes per message at worst (every message of the batch to a lane of its own): one `accept`. */
export const SUBREQUESTS_PER_ACCEPT = 1;
