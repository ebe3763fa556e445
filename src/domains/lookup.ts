import { desc, eq, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { domains, type DomainStatus } from "../db/schema";
import { TtlCache } from "../platform/cache";
import type { Challenge } from "./certificates";

/** What the host gate needs to know about a custom domain. */
export interface CustomDomainRoute {
  hostname: string;
  projectId: string;
  status: DomainStatus;
  challenge: Challenge | null;
}

/**
 * How stale another isolate's view of a domain may be: a newly validated domain is served
 * everywhere, and a removed one refused everywhere, within this time. Unknown hosts are
 * remembered too, so a flood of made-up Host headers does not become a flood of D1 reads.
 * A hostname claimed by more than one project is never cached: its holder can change when another
 * claim proves ownership, and the old holder must stop serving at once in every isolate.
 */
export const HOST_CACHE_TTL_MS = 60_000;
const hosts = new TtlCache<CustomDomainRoute | null>(HOST_CACHE_TTL_MS);

/** The custom domain for a request's hostname; a D1 read only when this isolate has no fresh entry. */
export async function routeForHost(db: Database, hostname: string, now: number): Promise<CustomDomainRoute | null> {
  const cached = hosts.get(hostname, now);
  if (cached !== undefined) return cached;
  const rows = await db
    .select({
      hostname: domains.hostname,
      projectId: domains.projectId,
      status: domains.status,
      challengePath: domains.challengePath,
      challengeBody: domains.challengeBody,
    })
    .from(domains)
    .where(eq(domains.hostname, hostname))
    // The validated claim, if any, is the one that routes; a second row means the hostname is contested.
    .orderBy(desc(sql`${domains.status} = 'validated'`))
    .limit(2);
  const row = rows[0];
  const route = row
    ? {
        hostname: row.hostname,
        projectId: row.projectId,
        status: row.status,
        challenge:
          row.challengePath && row.challengeBody !== null ? { path: row.challengePath, body: row.challengeBody } : null,
      }
    : null;
  if (rows.length < 2) hosts.set(hostname, route, now);
  return route;
}

/** Makes this isolate see a change to the domain at once (others within HOST_CACHE_TTL_MS). */
export function forgetHost(hostname: string): void {
  hosts.delete(hostname);
}
