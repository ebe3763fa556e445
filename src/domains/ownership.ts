import { and, gt, inArray, lte, ne } from "drizzle-orm";
import type { Database } from "../db/client";
import { domainReleases, domains, type Domain } from "../db/schema";
import type { DnsResolver } from "./dns";

/**
 * Ownership of a hostname (docs/domains.md, Ownership). Only a validated claim holds a
 * hostname. A claim is contested when another project also claims the hostname (in any state) or
 * held it validated in the last 30 days; a contested claim validates only when its own TXT record
 * is present too, so neither a squatter's early claim nor a CNAME left dangling hands it over.
 */
export const OWNERSHIP_LABEL = "_gateway-challenge";
export const CONTEST_MS = 30 * 24 * 60 * 60 * 1000;

export const ownershipRecordName = (hostname: string) => `${OWNERSHIP_LABEL}.${hostname}`;

/** 128 random bits, hex: unguessable, and unique per claim, so one claim's proof proves nothing for another. */
export function newOwnershipValue(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `gw-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export const ownershipRecordOf = (d: Pick<Domain, "hostname" | "ownershipValue">) => ({
  type: "TXT" as const,
  name: ownershipRecordName(d.hostname),
  value: d.ownershipValue,
});

/** Of `hostnames`, those contested for `projectId` at `now` (two D1 reads, whatever the number of names). */
export async function contestedHostnames(
  db: Database,
  projectId: string,
  hostnames: readonly string[],
  now: Date,
): Promise<Set<string>> {
  if (hostnames.length === 0) return new Set();
  const names = [...new Set(hostnames)];
  const [claims, releases] = await Promise.all([
    db
      .selectDistinct({ hostname: domains.hostname })
      .from(domains)
      .where(and(inArray(domains.hostname, names), ne(domains.projectId, projectId))),
    db
      .selectDistinct({ hostname: domainReleases.hostname })
      .from(domainReleases)
      .where(
        and(
          inArray(domainReleases.hostname, names),
          ne(domainReleases.projectId, projectId),
          gt(domainReleases.releasedAt, new Date(now.getTime() - CONTEST_MS)),
        ),
      ),
  ]);
  return new Set([...claims, ...releases].map((r) => r.hostname));
}

export const isContested = async (db: Database, d: Pick<Domain, "hostname" | "projectId">, now: Date) =>
  (await contestedHostnames(db, d.projectId, [d.hostname], now)).has(d.hostname);

export type Proof = { proven: true } | { proven: false; message: string };

/** Whether the claim's TXT record is published. Resolver failures propagate (ResolverError). */
export async function checkOwnershipRecord(
  resolver: DnsResolver,
  d: Pick<Domain, "hostname" | "ownershipValue">,
): Promise<Proof> {
  const name = ownershipRecordName(d.hostname);
  const answer = await resolver.resolve(name, "TXT");
  const values = answer.records.filter((r) => r.type === "TXT" && r.name === name).map((r) => r.data.trim());
  if (values.includes(d.ownershipValue)) return { proven: true };
  const seen = values.length
    ? `${name} has TXT ${values.map((v) => `"${v.slice(0, 100)}"`).join(", ")}, not this domain's value.`
    : `No TXT record exists at ${name} yet.`;
  return {
    proven: false,
    message: `${d.hostname} points here, but it is also claimed by another project or was held by one in the last 30 days, so the CNAME alone does not prove it is yours. Add the TXT record ${name} with the value ${d.ownershipValue} (keep the CNAME), then validate again. ${seen}`,
  };
}

/** Records that `projectId` gave up `hostname` after holding it validated: the 30-day contest starts. */
export const releaseStatement = (db: Database, hostname: string, projectId: string, now: Date) =>
  db.insert(domainReleases).values({ hostname, projectId, releasedAt: now });

/** Releases older than the contest no longer matter. */
export const forgetOldReleases = (db: Database, now: Date) =>
  db.delete(domainReleases).where(lte(domainReleases.releasedAt, new Date(now.getTime() - CONTEST_MS)));
