import { and, eq } from "drizzle-orm";
import type { Database } from "../db/client";
import { domains, type Domain } from "../db/schema";
import type { Config } from "../platform/env";
import { ApiError } from "../platform/errors";
import { rfc3339, rfc3339OrNull } from "../platform/openapi";
import { normaliseHostname } from "./hostname";
import { contestedHostnames, ownershipRecordOf } from "./ownership";
import { targetFor } from "./rules";

/** Automatic validation: every half hour, on the cron's own ticks, for two days after creation. */
export const CHECK_INTERVAL_MS = 30 * 60 * 1000;
export const AUTO_VALIDATION_WINDOW_MS = 2 * 24 * 60 * 60 * 1000;

/** The first cron tick strictly after `now` (ticks are at :00 and :30, UTC). */
export const nextTick = (now: Date) =>
  new Date((Math.floor(now.getTime() / CHECK_INTERVAL_MS) + 1) * CHECK_INTERVAL_MS);

export const dnsRecordOf = (d: Pick<Domain, "hostname" | "apex" | "region">, config: Config) => ({
  type: d.apex ? ("ALIAS" as const) : ("CNAME" as const),
  name: d.hostname,
  value: targetFor(d.region, config.serviceDomain),
});

/** The next automatic attempt, or null when there will be none (not pending, or the window is over). */
export const nextAutomaticCheck = (d: Domain) =>
  d.status === "pending" && d.nextCheckAt.getTime() < d.autoValidationEndsAt.getTime() ? d.nextCheckAt : null;

/** `ownershipRequired`: the hostname is contested for this claim (src/domains/ownership.ts). */
export const domainJson = (d: Domain, config: Config, ownershipRequired: boolean) => ({
  domain: d.hostname,
  project_id: d.projectId,
  region: d.region,
  status: d.status,
  dns_record: dnsRecordOf(d, config),
  ownership_record: ownershipRecordOf(d),
  ownership_required: ownershipRequired,
  last_error: d.lastErrorCode ? { code: d.lastErrorCode, message: d.lastErrorMessage ?? "" } : null,
  last_checked_at: rfc3339OrNull(d.lastCheckedAt),
  next_check_at: rfc3339OrNull(nextAutomaticCheck(d)),
  auto_validation_ends_at: rfc3339(d.autoValidationEndsAt),
  validated_at: rfc3339OrNull(d.validatedAt),
  certificate_status: d.certificateStatus,
  created_at: rfc3339(d.createdAt),
});

/** The API form of one project's domains, with whether each needs its ownership record (two D1 reads). */
export async function domainsJson(db: Database, config: Config, now: Date, rows: Domain[]) {
  const projectId = rows[0]?.projectId;
  const contested = projectId
    ? await contestedHostnames(
        db,
        projectId,
        rows.map((d) => d.hostname),
        now,
      )
    : new Set<string>();
  return rows.map((d) => domainJson(d, config, contested.has(d.hostname)));
}

export const oneDomainJson = async (db: Database, config: Config, now: Date, d: Domain) =>
  (await domainsJson(db, config, now, [d]))[0]!;

/** The project's domain named in a path (normalised first); 404 for anything else. */
export async function findDomain(db: Database, projectId: string, domain: string): Promise<Domain> {
  const hostname = normaliseHostname(domain);
  const [row] = hostname
    ? await db
        .select()
        .from(domains)
        .where(and(eq(domains.projectId, projectId), eq(domains.hostname, hostname)))
        .limit(1)
    : [];
  if (!row) throw new ApiError("not_found", `No domain '${domain}' in this project.`);
  return row;
}
