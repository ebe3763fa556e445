import { and, eq, inArray, ne, sql } from "drizzle-orm";
import { domains, type Domain, type DomainStatus } from "../db/schema";
import type { Scope } from "../platform/scope";
import { CertificateError, type CertificateState } from "./certificates";
import { checkCaa } from "./caa";
import { type DnsResolver, ResolverError } from "./dns";
import { forgetHost } from "./lookup";
import { checkOwnershipRecord, isContested, ownershipRecordName } from "./ownership";
import { checkDomain, type CheckResult, targetFor, unavailable } from "./rules";
import { log } from "../platform/log";

/** The columns an outcome writes. A resolver failure changes nothing but the error and check time. */
function changesFor(outcome: CheckResult, current: DomainStatus, now: Date): Partial<Domain> {
  const base = { lastCheckedAt: now, updatedAt: now };
  switch (outcome.result) {
    case "validated":
      return {
        ...base,
        status: "validated",
        validatedAt: now,
        lastErrorCode: null,
        lastErrorMessage: null,
        certificateStatus: "pending",
      };
    case "misconfigured":
      return { ...base, status: "failed", lastErrorCode: outcome.code, lastErrorMessage: outcome.message };
    case "no_record":
      // No record is not a misconfiguration: the customer has not got to it yet (or removed a wrong one).
      return { ...base, status: "pending", lastErrorCode: outcome.code, lastErrorMessage: outcome.message };
    case "unavailable":
    case "unproven":
      // A contested claim without its TXT record "stays as it is" (docs/domains.md, Ownership): it may not fail a
      // claim that is merely waiting for its owner's proof, nor validate one.
      return { ...base, status: current, lastErrorCode: outcome.code, lastErrorMessage: outcome.message };
  }
}

/**
 * The DNS rules first; then, for a record that points here, the ownership proof when the hostname
 * is contested, and CAA. Every DNS query goes through one resolver: at most MAX_QUERIES_PER_CHECK
 * (6) + 1 TXT + MAX_CAA_LOOKUPS (4) per check.
 */
async function decide(s: Scope, resolver: DnsResolver, domain: Domain): Promise<CheckResult> {
  const outcome = await checkDomain(resolver, {
    hostname: domain.hostname,
    apex: domain.apex,
    target: targetFor(domain.region, s.config.serviceDomain),
    region: domain.region,
    serviceDomain: s.config.serviceDomain,
  });
  if (outcome.result !== "validated") return outcome;
  try {
    if (await isContested(s.db, domain, s.deps.now())) {
      const proof = await checkOwnershipRecord(resolver, domain);
      if (!proof.proven) return { result: "unproven", code: "OWNERSHIP_PROOF_REQUIRED", message: proof.message };
    }
    const caa = await checkCaa(resolver, domain.hostname, s.config.certificateAuthority);
    if (!caa.allowed) return { result: "misconfigured", code: "CAA_BLOCKS_CERTIFICATE", message: caa.message };
  } catch (error) {
    if (error instanceof ResolverError) return unavailable(error.message);
    throw error;
  }
  return outcome;
}

/** What becomes of every other claim on a hostname that one claim has just validated. */
const movedAway = (domain: Domain, now: Date): Partial<Domain> => ({
  status: "failed",
  lastErrorCode: "OWNERSHIP_MOVED",
  lastErrorMessage: `Another project validated ${domain.hostname} on ${now.toISOString()}, so this claim no longer holds it and the hostname no longer serves this project. If the hostname is yours, publish this domain's own TXT record at ${ownershipRecordName(domain.hostname)}, keep the CNAME, and validate again.`,
  validatedAt: null,
  // The certificate belongs to the hostname, not the claim: the new holder adopts it (duplicate
  // custom hostname), so removing this claim later must not delete it.
  certificateStatus: "none",
  certificateRef: null,
  certificateCheckedAt: null,
  challengePath: null,
  challengeBody: null,
  updatedAt: now,
});

/**
 * One validation attempt: DNS, then a write conditional on the status read, so a concurrent attempt
 * (the cron and a manual click) cannot undo the other's result. On Validated the certificate is asked
 * for at once; if the provider fails, the domain stays validated with certificate `pending` and the
 * cron asks again.
 */
export async function validateDomain(s: Scope, domain: Domain): Promise<Domain> {
  const outcome = await decide(s, s.deps.resolver(s.config), domain);
  const now = s.deps.now();
  // "Still as read": the status and the last error code. A move by another claim leaves a failed claim
  // failed but sets OWNERSHIP_MOVED, so a decision taken before that move can never undo it.
  const code = domain.lastErrorCode ?? "";
  const mine = s.db
    .update(domains)
    .set(changesFor(outcome, domain.status, now))
    .where(
      and(
        eq(domains.id, domain.id),
        eq(domains.status, domain.status),
        inArray(domains.status, ["pending", "failed"]),
        sql`coalesce(${domains.lastErrorCode}, '') = ${code}`,
      ),
    )
    .returning();
  let updated: Domain | undefined;
  if (outcome.result === "validated") {
    // One transaction: every other claim on the hostname fails with OWNERSHIP_MOVED, then this one
    // validates, both only if this claim is still as it was read (so a concurrent attempt that got
    // there first wins, and the one-holder index is never hit).
    const [moved, [row]] = await s.db.batch([
      s.db
        .update(domains)
        .set(movedAway(domain, now))
        .where(
          and(
            eq(domains.hostname, domain.hostname),
            ne(domains.id, domain.id),
            sql`exists (select 1 from domains as claim where claim.id = ${domain.id} and claim.status = ${domain.status} and claim.status in ('pending', 'failed') and coalesce(claim.last_error_code, '') = ${code})`,
          ),
        )
        .returning({ projectId: domains.projectId }),
      mine,
    ]);
    updated = row;
    if (moved.length > 0)
      log("warn", "hostname moved to the project that validated it", {
        domain: domain.hostname,
        to: domain.projectId,
        from: moved.map((m) => m.projectId),
      });
  } else {
    [updated] = await mine;
  }
  if (!updated) return (await s.db.select().from(domains).where(eq(domains.id, domain.id)).limit(1))[0] ?? domain;
  if (updated.status !== domain.status) {
    forgetHost(domain.hostname);
    log("info", "domain status changed", {
      domain: domain.hostname,
      from: domain.status,
      to: updated.status,
      code: updated.lastErrorCode,
    });
  }
  return updated.status === "validated" ? await provisionCertificate(s, updated) : updated;
}

async function recordCertificate(s: Scope, domain: Domain, state: CertificateState): Promise<Domain> {
  const now = s.deps.now();
  const [updated] = await s.db
    .update(domains)
    .set({
      certificateStatus: state.status,
      certificateRef: state.ref,
      certificateCheckedAt: now,
      challengePath: state.challenge?.path ?? null,
      challengeBody: state.challenge?.body ?? null,
      updatedAt: now,
    })
    .where(eq(domains.id, domain.id))
    .returning();
  forgetHost(domain.hostname);
  if (!updated) {
    // Removed while the certificate was being asked for: do not leave it behind at the provider.
    await s.deps
      .certificates(s.config)
      .remove(state.ref)
      .catch(() => undefined);
    return domain;
  }
  return updated;
}

async function certificateFailed(s: Scope, domain: Domain, error: unknown): Promise<Domain> {
  if (!(error instanceof CertificateError)) throw error;
  log("warn", "certificate request failed; will retry", { domain: domain.hostname, error });
  const now = s.deps.now();
  const [updated] = await s.db
    .update(domains)
    .set({ certificateCheckedAt: now })
    .where(eq(domains.id, domain.id))
    .returning();
  return updated ?? domain;
}

/** Asks the provider for the domain's certificate (the first time, or again after a failed request). */
export async function provisionCertificate(s: Scope, domain: Domain): Promise<Domain> {
  try {
    return await recordCertificate(s, domain, await s.deps.certificates(s.config).provision(domain.hostname));
  } catch (error) {
    return certificateFailed(s, domain, error);
  }
}

/** Reads back a pending certificate (provisioning it if the first request failed). */
export async function refreshCertificate(s: Scope, domain: Domain): Promise<Domain> {
  if (!domain.certificateRef) return provisionCertificate(s, domain);
  try {
    return await recordCertificate(s, domain, await s.deps.certificates(s.config).status(domain.certificateRef));
  } catch (error) {
    return certificateFailed(s, domain, error);
  }
}
