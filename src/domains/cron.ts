import { and, asc, eq, gt, inArray, isNull, lte, or, sql } from "drizzle-orm";
import { domains, type Domain } from "../db/schema";
import { eachLimited } from "../platform/concurrency";
import type { Scope } from "../platform/scope";
import { MAX_CAA_LOOKUPS } from "./caa";
import { removeExpiredClaims } from "./expiry";
import { MAX_QUERIES_PER_CHECK } from "./rules";
import { nextTick } from "./store";
import { refreshCertificate, validateDomain } from "./validate";
import { validationMessage } from "./validation-message";
import { log } from "../platform/log";

/*
 * Subrequest budget. Workers Free allows 50 subrequests per invocation (Paid: 1,000 by default); we
 * plan for 50 and count D1 statements and queue sends as subrequests too, to be safe.
 *   one check:         ≤ 6 DoH (CNAME rules) + 1 TXT (ownership) + 4 CAA + 4 D1 (contest: 2 reads,
 *                      the conditional write or move batch, re-read) + 2 certificate API calls
 *                      (create, adopt on duplicate) + 1 D1 (certificate state)                    = 18
 *   cron invocation:   1 claim + ≤ 10 sendBatch (100 messages each) + 1 inline check + 1 expiry
 *                      batch + 1 certificate select + 2 refreshes × 3                              ≤ 38
 *   queue invocation:  max_batch_size (2, wrangler.toml) × (1 D1 read + one check)                 ≤ 38
 * So one cron run takes on at most 1,000 due domains; any left over stay due for the next run.
 */
export const SUBREQUEST_LIMIT = 50;
export const SUBREQUESTS_PER_CHECK = MAX_QUERIES_PER_CHECK + 1 + MAX_CAA_LOOKUPS + 7;
export const INLINE_CHECKS_PER_CRON = 1;
export const CHECKS_PER_QUEUE_BATCH = 2;
export const MAX_CLAIMS_PER_CRON = 1_000;
export const CERTIFICATE_REFRESHES_PER_CRON = 2;
/** Domains checked at once within one invocation (Workers allow 6 open connections; a check opens up to 4). */
export const CHECK_CONCURRENCY = 2;
export const SEND_BATCH_LIMIT = 100;
/** The largest time a Date holds: "no automatic attempt any more". */
const NEVER = 8_640_000_000_000_000;

/**
 * Claims the due pending domains in one statement: their next_check_at moves to the next tick, so
 * a second run that overlaps this one finds nothing due and checks nothing twice.
 */
export async function claimDueDomains(s: Scope, now: Date, max: number): Promise<Domain[]> {
  const due = and(eq(domains.status, "pending"), lte(domains.nextCheckAt, now), gt(domains.autoValidationEndsAt, now));
  const oldestFirst = s.db
    .select({ id: domains.id })
    .from(domains)
    .where(due)
    .orderBy(asc(domains.nextCheckAt))
    .limit(max);
  const tick = nextTick(now).getTime();
  return (
    s.db
      .update(domains)
      // After the last tick of its window a domain is parked beyond reach, so the due index never
      // has to step over the growing number of domains whose window is over.
      .set({
        nextCheckAt: sql`CASE WHEN ${tick} < ${domains.autoValidationEndsAt} THEN ${tick} ELSE ${NEVER} END`,
        updatedAt: now,
      })
      .where(and(inArray(domains.id, oldestFirst), due))
      .returning()
  );
}

const logFailures = (results: PromiseSettledResult<unknown>[], what: string) => {
  for (const result of results) {
    if (result.status === "rejected") log("error", `${what} failed`, { error: result.reason });
  }
};

/**
 * The `*\/30 * * * *` cron: automatic validation of pending domains, certificates still pending, and
 * expired claims. It works from the tick's scheduled time, not the clock: a run that starts late
 * still checks what was due at its tick (and a domain whose window closed after the tick).
 */
export async function domainValidationCron(
  s: Scope,
  scheduledTime: number = s.deps.now().getTime(),
): Promise<{ claimed: number; checked: number; queued: number }> {
  const now = new Date(scheduledTime);
  const claimed = await claimDueDomains(s, now, MAX_CLAIMS_PER_CRON);
  const inline = claimed.slice(0, INLINE_CHECKS_PER_CRON);
  const rest = claimed.slice(INLINE_CHECKS_PER_CRON);
  for (let i = 0; i < rest.length; i += SEND_BATCH_LIMIT) {
    await s.env.DOMAIN_QUEUE.sendBatch(
      rest.slice(i, i + SEND_BATCH_LIMIT).map((d) => ({ body: validationMessage(d.id, now.getTime()) })),
    );
  }
  logFailures(await eachLimited(inline, CHECK_CONCURRENCY, (d) => validateDomain(s, d)), "domain check");

  const pendingCertificates = await s.db
    .select()
    .from(domains)
    .where(
      and(
        eq(domains.status, "validated"),
        eq(domains.certificateStatus, "pending"),
        or(isNull(domains.certificateCheckedAt), lte(domains.certificateCheckedAt, new Date(now.getTime() - 60_000))),
      ),
    )
    .orderBy(asc(domains.certificateCheckedAt))
    .limit(CERTIFICATE_REFRESHES_PER_CRON);
  logFailures(
    await eachLimited(pendingCertificates, CHECK_CONCURRENCY, (d) => refreshCertificate(s, d)),
    "certificate refresh",
  );
  await removeExpiredClaims(s.db, now);
  if (claimed.length > 0) {
    log("info", "domain validation run", { claimed: claimed.length, inline: inline.length, queued: rest.length });
  }
  return { claimed: claimed.length, checked: inline.length, queued: rest.length };
}
