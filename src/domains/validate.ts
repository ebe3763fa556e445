import { and, eq, inArray } from "drizzle-orm";
import { domains, type Domain, type DomainStatus } from "../db/schema";
import type { Scope } from "../platform/scope";
import { CertificateError, type CertificateState } from "./certificates";
import { forgetHost } from "./lookup";
import { checkDomain, type CheckResult, targetFor } from "./rules";

const log = (level: "info" | "warn", msg: string, fields: Record<string, unknown>) =>
  console.log(JSON.stringify({ level, msg, ...fields }));

/** The columns an outcome writes. A resolver failure changes nothing but the error and check time. */
function changesFor(outcome: CheckResult, current: DomainStatus, now: Date): Partial<Domain> {
  const base = { lastCheckedAt: now, updatedAt: now };
  switch (outcome.result) {
    case "validated":
      return { ...base, status: "validated", validatedAt: now, lastErrorCode: null, lastErrorMessage: null, certificateStatus: "pending" };
    case "misconfigured":
      return { ...base, status: "failed", lastErrorCode: outcome.code, lastErrorMessage: outcome.message };
    case "no_record":
      // No record is not a misconfiguration: the customer has not got to it yet (or removed a wrong one).
      return { ...base, status: "pending", lastErrorCode: outcome.code, lastErrorMessage: outcome.message };
    case "unavailable":
      return { ...base, status: current, lastErrorCode: outcome.code, lastErrorMessage: outcome.message };
  }
}

/**
 * One validation attempt: DNS, then a write conditional on the status read, so a concurrent attempt
 * (the cron and a manual click) cannot undo the other's result. On Validated the certificate is asked
 * for at once; if the provider fails, the domain stays validated with certificate `pending` and the
 * cron asks again.
 */
export async function validateDomain(s: Scope, domain: Domain): Promise<Domain> {
  const outcome = await checkDomain(s.deps.resolver(s.config), {
    hostname: domain.hostname,
    apex: domain.apex,
    target: targetFor(domain.region, s.config.serviceDomain),
    region: domain.region,
    serviceDomain: s.config.serviceDomain,
  });
  const now = s.deps.now();
  const [updated] = await s.db
    .update(domains)
    .set(changesFor(outcome, domain.status, now))
    .where(and(eq(domains.id, domain.id), eq(domains.status, domain.status), inArray(domains.status, ["pending", "failed"])))
    .returning();
  if (!updated) return (await s.db.select().from(domains).where(eq(domains.id, domain.id)).limit(1))[0] ?? domain;
  if (updated.status !== domain.status) {
    forgetHost(domain.hostname);
    log("info", "domain status changed", { domain: domain.hostname, from: domain.status, to: updated.status, code: updated.lastErrorCode });
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
    await s.deps.certificates(s.config).remove(state.ref).catch(() => undefined);
    return domain;
  }
  return updated;
}

async function certificateFailed(s: Scope, domain: Domain, error: unknown): Promise<Domain> {
  if (!(error instanceof CertificateError)) throw error;
  log("warn", "certificate request failed; will retry", { domain: domain.hostname, error: error.message });
  const now = s.deps.now();
  const [updated] = await s.db.update(domains).set({ certificateCheckedAt: now }).where(eq(domains.id, domain.id)).returning();
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
