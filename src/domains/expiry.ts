import { and, inArray, lte, ne } from "drizzle-orm";
import type { Database } from "../db/client";
import { domains } from "../db/schema";
import { forgetHost } from "./lookup";
import { forgetOldReleases } from "./ownership";
import { log } from "../platform/log";

/**
 * Claims are bounded (docs/domains.md, Ownership): one never validated is removed 30 days after its
 * automatic window ends (32 days after creation), so a squatter's claims do not pile up forever.
 * Such a claim never has a certificate (a claim that loses its hostname gives its certificate up),
 * so removal calls no provider.
 */
export const CLAIM_KEPT_AFTER_WINDOW_MS = 30 * 24 * 60 * 60 * 1000;
/** Removals one cron run makes at most (two D1 statements whatever the number); the rest wait a tick. */
export const MAX_EXPIRIES_PER_CRON = 500;

export async function removeExpiredClaims(db: Database, now: Date): Promise<number> {
  const unvalidated = ne(domains.status, "validated");
  const expired = and(
    unvalidated,
    lte(domains.autoValidationEndsAt, new Date(now.getTime() - CLAIM_KEPT_AFTER_WINDOW_MS)),
  );
  const oldest = db.select({ id: domains.id }).from(domains).where(expired).limit(MAX_EXPIRIES_PER_CRON);
  const [removed] = await db.batch([
    db
      .delete(domains)
      .where(and(inArray(domains.id, oldest), unvalidated))
      .returning({ hostname: domains.hostname, projectId: domains.projectId }),
    forgetOldReleases(db, now),
  ]);
  for (const claim of removed) forgetHost(claim.hostname);
  if (removed.length > 0) log("info", "expired domain claims removed", { count: removed.length });
  return removed.length;
}
