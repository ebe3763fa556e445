import { HOUR_MS } from "../platform/time";
/**
 * Refusals: requests refused before their app was known (the project's run budget spent: 429
 * `rate_limited`; an app the project does not have: 404 `not_found`). Not runs, so never a record: a
 * caller may repeat them without limit, and they would name apps and paths the caller invented. The
 * ledger counts them per project, hour and reason (the problem code), so whatever their rate they cost
 * the ledger one row per hour and reason, and nothing the caller chose is stored.
 *
 * A refusal reaches the ledger as a count: the isolate adds each to its (project, hour, reason) count
 * (src/usage/buffer.ts) and the counts leave with the run records' next batch.
 */

/** The reasons a customer sees with zeros when none came (`totals.refused` of the usage figures). */
export const REFUSAL_REASONS = ["rate_limited", "not_found"] as const;

/** A reason as the ledger stores it: a problem code (`a-z`, `_`, at most 40), else `other`. */
export const reasonOf = (code: string) => (/^[a-z][a-z_]{0,39}$/.test(code) ? code : "other");

/** Refusals of one project, hour and reason, as they travel to the ledger (batches, queue messages). */
export interface RefusalCount {
  project_id: string;
  /** The hour's start, epoch milliseconds. */
  hour: number;
  reason: string;
  count: number;
}

export const hourOf = (at: number) => Math.floor(at / HOUR_MS) * HOUR_MS;
