import { sql } from "drizzle-orm";
import { auditLog } from "../db/schema";
import { idFloor } from "../platform/ids";
import type { PurgeStep } from "../platform/purge";
import type { Scope } from "../platform/scope";

/**
 * The audit log's retention (docs/operations.md#retention): an entry is deleted
 * `AUDIT_LOG_RETENTION_DAYS` after it was written, oldest first, in the retention cron's slices
 * (src/retention.ts). An entry's id sorts by its time (`aud_` + its time, src/platform/ids.ts), so a
 * slice takes the ids below the floor of the retention's start over the primary key's index: it reads
 * only the rows it deletes, with no index on `at`.
 */

/** The ids of the next slice of entries written before `before`, oldest first. */
export const auditSlice = (before: number, limit: number) =>
  sql`SELECT "id" FROM "audit_log" WHERE "id" < ${idFloor("aud", before)} ORDER BY "id" LIMIT ${limit}`;

/** The audit log's purge step at `now`. */
export function auditLogSteps(scope: Scope): PurgeStep[] {
  const before = scope.deps.now().getTime() - scope.config.auditRetentionMs;
  return [
    {
      name: "audit_log",
      subrequests: 1, // one DELETE … RETURNING
      slice: async (rows) => {
        const deleted = await scope.db
          .delete(auditLog)
          .where(sql`${auditLog.id} IN (${auditSlice(before, rows)})`)
          .returning({ id: auditLog.id });
        return deleted.length;
      },
    },
  ];
}
