import { auditLogSteps } from "./audit/retention";
import { log } from "./platform/log";
import { drain, type PurgeBudget } from "./platform/purge";
import type { Scope } from "./platform/scope";
import { asyncRunSteps } from "./runs/async/sweep";
import { deliveryLogSteps } from "./webhooks/retention";

/**
 * The `* * * * *` cron: every store in D1 that grows with traffic (the delivery log, async runs), and
 * the audit log, which grows with the management writes of every project, purged past its retention, in slices, until caught up or this budget is spent; what is left goes on a
 * minute later. The arithmetic (docs/webhooks.md#retention):
 *
 * - **Writer**: a slice is one D1 round trip of ≤ 500 rows over an index of exactly the rows it takes,
 *   and slices go one at a time, so the live writes queued behind one (D1 runs one query at a time,
 *   in order) go before the next: a live write waits one slice at most, never the whole purge.
 * - **Subrequests**: ≤ 400 an invocation (D1 round trips and R2 calls), within Workers Paid's 1,000
 *   (10,000 on today's plan). Workers Free allows 50, but also 100,000 requests a day (≈ 1.2 runs/s),
 *   which the first slice of each step catches up with (500 rows a minute ≈ 8/s): the drain stops there.
 * - **Rate**: with 400 subrequests, a delivery costs 3/500 of one (a body slice is 2, a record slice 1),
 *   so ≤ 400 × 500 / 3 ≈ 66,000 deliveries a minute ≈ **1,100/s**, past D1's ceiling of ≈ 700
 *   first-attempt deliveries/s (docs/webhooks.md, capacity model); async runs (3 per 500) the same.
 *   Deliveries and async runs share the one writer, so together they arrive no faster than it allows.
 * - **Wall time**: 40 s at most, so a minute's invocation is done before the next one starts.
 */
export const RETENTION_BUDGET: PurgeBudget = { rows: 500, subrequests: 400, wallMs: 40_000 };

/** Runs the retention purge of the delivery log, async runs and the audit log. */
export async function retentionCron(scope: Scope, budget: PurgeBudget = RETENTION_BUDGET) {
  const steps = [...deliveryLogSteps(scope), ...asyncRunSteps(scope), ...auditLogSteps(scope)];
  const report = await drain(steps, budget, () => Date.now());
  const removed = Object.values(report.removed).reduce((a, b) => a + b, 0);
  if (removed > 0 || !report.done) {
    log(report.done ? "info" : "warn", "retention purged", {
      ...report.removed,
      subrequests: report.subrequests,
      caught_up: report.done,
    });
  }
  return report;
}
