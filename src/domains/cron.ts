import { and, asc, eq, gt, inArray, isNull, lte, or, sql } from "drizzle-orm";
import { createDb } from "../db/client";
import { domains, type Domain } from "../db/schema";
import type { Deps } from "../platform/context";
import { type Env, getConfig } from "../platform/env";
import { MAX_CAA_LOOKUPS } from "./caa";
import { removeExpiredClaims } from "./expiry";
import { MAX_QUERIES_PER_CHECK } from "./rules";
import { nextTick } from "./store";
import { refreshCertificate, type Services, validateDomain } from "./validate";

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

export interface ValidationMessage {
  domain_id: string;
  /** When the cron claimed it (ms): a redelivered message whose domain was checked since is skipped. */
  claimed_at: number;
}

const isValidationMessage = (body: unknown): body is ValidationMessage =>
  typeof body === "object" && body !== null && typeof (body as ValidationMessage).domain_id === "string" && typeof (body as ValidationMessage).claimed_at === "number";

export const servicesFor = (env: Env, deps: Deps): Services => ({ db: createDb(env.DB), config: getConfig(env), deps });

/** Runs `work` over `items`, at most `limit` at a time; one failure does not stop the others. */
export async function eachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<unknown>): Promise<PromiseSettledResult<unknown>[]> {
  const results: PromiseSettledResult<unknown>[] = [];
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!).then(
        (value) => ({ status: "fulfilled", value }) as const,
        (reason: unknown) => ({ status: "rejected", reason }) as const,
      );
    }
  });
  await Promise.all(lanes);
  return results;
}

/**
 * Claims the due pending domains in one statement: their next_check_at moves to the next tick, so
 * a second run that overlaps this one finds nothing due and checks nothing twice.
 */
export async function claimDueDomains(s: Services, now: Date, max: number): Promise<Domain[]> {
  const due = and(eq(domains.status, "pending"), lte(domains.nextCheckAt, now), gt(domains.autoValidationEndsAt, now));
  const oldestFirst = s.db.select({ id: domains.id }).from(domains).where(due).orderBy(asc(domains.nextCheckAt)).limit(max);
  const tick = nextTick(now).getTime();
  return s.db
    .update(domains)
    // After the last tick of its window a domain is parked beyond reach, so the due index never
    // has to step over the growing number of domains whose window is over.
    .set({ nextCheckAt: sql`CASE WHEN ${tick} < ${domains.autoValidationEndsAt} THEN ${tick} ELSE ${NEVER} END`, updatedAt: now })
    .where(and(inArray(domains.id, oldestFirst), due))
    .returning();
}

const logFailures = (results: PromiseSettledResult<unknown>[], what: string) => {
  for (const result of results) {
    if (result.status === "rejected") console.error(JSON.stringify({ level: "error", msg: `${what} failed`, error: String(result.reason) }));
  }
};

/**
 * The `*\/30 * * * *` cron: automatic validation of pending domains, certificates still pending, and
 * expired claims. It works from the tick's scheduled time, not the clock: a run that starts late
 * still checks what was due at its tick (and a domain whose window closed after the tick).
 */
export async function domainValidationCron(env: Env, deps: Deps, scheduledTime: number = deps.now().getTime()): Promise<{ claimed: number; checked: number; queued: number }> {
  const s = servicesFor(env, deps);
  const now = new Date(scheduledTime);
  const claimed = await claimDueDomains(s, now, MAX_CLAIMS_PER_CRON);
  const inline = claimed.slice(0, INLINE_CHECKS_PER_CRON);
  const rest = claimed.slice(INLINE_CHECKS_PER_CRON);
  for (let i = 0; i < rest.length; i += SEND_BATCH_LIMIT) {
    await env.DOMAIN_QUEUE.sendBatch(
      rest.slice(i, i + SEND_BATCH_LIMIT).map((d) => ({ body: { domain_id: d.id, claimed_at: now.getTime() } satisfies ValidationMessage })),
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
  logFailures(await eachLimited(pendingCertificates, CHECK_CONCURRENCY, (d) => refreshCertificate(s, d)), "certificate refresh");
  await removeExpiredClaims(s.db, now);
  if (claimed.length > 0) {
    console.log(JSON.stringify({ level: "info", msg: "domain validation run", claimed: claimed.length, inline: inline.length, queued: rest.length }));
  }
  return { claimed: claimed.length, checked: inline.length, queued: rest.length };
}

/** The domain-validation queue consumer: the checks one cron run had more of than it could do itself. */
export async function domainValidationConsumer(batch: MessageBatch<unknown>, env: Env, deps: Deps): Promise<void> {
  const s = servicesFor(env, deps);
  await eachLimited(batch.messages, CHECK_CONCURRENCY, async (message) => {
    if (!isValidationMessage(message.body)) {
      console.error(JSON.stringify({ level: "error", msg: "malformed domain validation message dropped", id: message.id }));
      message.ack();
      return;
    }
    const { domain_id, claimed_at } = message.body;
    try {
      const [domain] = await s.db.select().from(domains).where(eq(domains.id, domain_id)).limit(1);
      const stale = !domain || domain.status !== "pending" || (domain.lastCheckedAt?.getTime() ?? 0) >= claimed_at;
      if (!stale) await validateDomain(s, domain);
      message.ack();
    } catch (error) {
      console.error(JSON.stringify({ level: "error", msg: "domain check failed; retrying", domain_id, error: String(error) }));
      message.retry({ delaySeconds: 30 });
    }
  });
}
