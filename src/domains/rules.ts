import { type DnsAnswer, type DnsRecord, type DnsResolver, ResolverError } from "./dns";

export type CheckResult =
  | { result: "validated"; via: "cname" | "cname_chain" | "flattened" }
  | {
      result: "misconfigured";
      code: "WRONG_TARGET" | "CONFLICTING_RECORDS" | "CAA_BLOCKS_CERTIFICATE";
      message: string;
    }
  /** The record points here, but the hostname is contested and the claim's TXT record is missing. */
  | { result: "unproven"; code: "OWNERSHIP_PROOF_REQUIRED"; message: string }
  | { result: "no_record"; code: "NO_RECORD"; message: string }
  | { result: "unavailable"; code: "DNS_UNAVAILABLE"; message: string };

export interface DomainUnderCheck {
  hostname: string;
  apex: boolean;
  /** `proxy.aws.{region}.{service_domain}` */
  target: string;
  region: string;
  serviceDomain: string;
}

/** The DNS queries one check may make at most (a subdomain with flattened addresses). */
export const MAX_QUERIES_PER_CHECK = 6;
const MAX_CHAIN = 8;
// Record types a resolver may return beside data without it being the customer's data.
const NOT_DATA = new Set(["CNAME", "RRSIG", "NSEC", "NSEC3", "HINFO", "OPT"]);

export const targetFor = (region: string, serviceDomain: string) => `proxy.aws.${region}.${serviceDomain}`;

export const unavailable = (reason: string): CheckResult => ({
  result: "unavailable",
  code: "DNS_UNAVAILABLE",
  message: `The DNS check could not be completed: ${reason}. Nothing changed; the check will be repeated, or validate again in a few minutes.`,
});

const list = (items: string[]) => items.join(", ");
const cacheHint = (records: DnsRecord[]) => {
  const ttl = Math.max(0, ...records.map((r) => r.ttl));
  return ttl > 0 ? ` DNS caches may keep the old answer for up to ${ttl} s after you change it.` : "";
};

function regionHint(seen: string, domain: DomainUnderCheck): string {
  const suffix = `.${domain.serviceDomain}`;
  const match = seen.endsWith(suffix) ? /^proxy\.aws\.([a-z0-9-]+)$/.exec(seen.slice(0, -suffix.length)) : null;
  return match && match[1] !== domain.region
    ? ` That is the target of region ${match[1]}, but this domain was created for region ${domain.region}.`
    : "";
}

/** The CNAME hops from `name` found in the answers, in order. */
function chainFrom(name: string, records: DnsRecord[]): DnsRecord[] {
  const hops: DnsRecord[] = [];
  let current = name;
  for (let i = 0; i < MAX_CHAIN; i++) {
    const hop = records.find((r) => r.type === "CNAME" && r.name === current);
    if (!hop || hops.includes(hop)) break;
    hops.push(hop);
    current = hop.data;
  }
  return hops;
}

const addressesOf = (name: string, ...answers: DnsAnswer[]) =>
  answers.flatMap((a) => a.records).filter((r) => r.name === name && (r.type === "A" || r.type === "AAAA"));

const describe = (records: DnsRecord[]) => list([...new Set(records.map((r) => `${r.type} ${r.data}`))]);

/**
 * Decides a domain's state from DNS, per docs/domains.md, Rules. Pure apart from the resolver,
 * so every rule is tested against crafted answers. A resolver failure never decides anything.
 */
export async function checkDomain(resolver: DnsResolver, domain: DomainUnderCheck): Promise<CheckResult> {
  try {
    return domain.apex ? await checkApex(resolver, domain) : await checkSubdomain(resolver, domain);
  } catch (error) {
    if (error instanceof ResolverError) return unavailable(error.message);
    throw error;
  }
}

async function targetAddresses(resolver: DnsResolver, target: string): Promise<Set<string>> {
  const [a, aaaa] = await Promise.all([resolver.resolve(target, "A"), resolver.resolve(target, "AAAA")]);
  const chainEnd = chainFrom(target, [...a.records, ...aaaa.records]).at(-1)?.data ?? target;
  return new Set(addressesOf(chainEnd, a, aaaa).map((r) => r.data));
}

function cnameOutcome(
  domain: DomainUnderCheck,
  cnames: DnsRecord[],
  chain: DnsRecord[],
  others: DnsRecord[],
): CheckResult {
  const { hostname, target } = domain;
  const targets = [...new Set(cnames.map((r) => r.data))];
  if (targets.length > 1) {
    const keep = targets.includes(target)
      ? `Remove all but the CNAME to ${target}.`
      : `Replace them with one CNAME to ${target}.`;
    return {
      result: "misconfigured",
      code: "CONFLICTING_RECORDS",
      message: `${hostname} has ${targets.length} CNAME records (${list(targets)}), but a name may have only one. ${keep}${cacheHint(cnames)}`,
    };
  }
  const reached = chain.some((hop) => hop.data === target);
  if (reached && others.length > 0) {
    return {
      result: "misconfigured",
      code: "CONFLICTING_RECORDS",
      message: `${hostname} has a CNAME to ${targets[0]} and also ${describe(others)}, but a name with a CNAME may hold no other record. Remove the ${list([...new Set(others.map((r) => r.type))])} record(s).${cacheHint(others)}`,
    };
  }
  if (reached) return { result: "validated", via: chain[0]?.data === target ? "cname" : "cname_chain" };
  const seen = targets[0]!;
  const via = chain.length > 1 ? ` (which leads on to ${list(chain.slice(1).map((h) => h.data))})` : "";
  return {
    result: "misconfigured",
    code: "WRONG_TARGET",
    message: `${hostname} has a CNAME to ${seen}${via}, but it must point to ${target}.${regionHint(seen, domain)} Change the record's value to ${target}.${cacheHint(chain)}`,
  };
}

async function checkSubdomain(resolver: DnsResolver, domain: DomainUnderCheck): Promise<CheckResult> {
  const { hostname, target } = domain;
  // ANY is best effort: many public resolvers refuse it (RFC 8482), so its failure decides nothing.
  const [cname, a, aaaa, any] = await Promise.all([
    resolver.resolve(hostname, "CNAME"),
    resolver.resolve(hostname, "A"),
    resolver.resolve(hostname, "AAAA"),
    resolver.resolve(hostname, "ANY").catch((error: unknown) => {
      if (error instanceof ResolverError) return { rcode: "NOERROR", records: [] } satisfies DnsAnswer;
      throw error;
    }),
  ]);
  const all = [cname, a, aaaa, any].flatMap((answer) => answer.records);
  const cnames = all.filter((r) => r.type === "CNAME" && r.name === hostname);
  if (cnames.length > 0) {
    const others = any.records.filter((r) => r.name === hostname && !NOT_DATA.has(r.type));
    return cnameOutcome(domain, cnames, chainFrom(hostname, all), others);
  }
  const addresses = addressesOf(hostname, a, aaaa);
  if (addresses.length > 0) {
    const ours = await targetAddresses(resolver, target);
    if (ours.size > 0 && addresses.every((r) => ours.has(r.data))) return { result: "validated", via: "flattened" };
    const foreign = addresses.filter((r) => !ours.has(r.data));
    return {
      result: "misconfigured",
      code: "CONFLICTING_RECORDS",
      message: `${hostname} has ${describe(foreign)} where the CNAME should be. Remove those record(s) and create CNAME ${hostname} → ${target}.${cacheHint(foreign)}`,
    };
  }
  return noRecord(
    domain,
    a,
    any.records.filter((r) => r.name === hostname && !NOT_DATA.has(r.type)),
  );
}

function noRecord(domain: DomainUnderCheck, answer: DnsAnswer, unrelated: DnsRecord[]): CheckResult {
  const { hostname, target, apex } = domain;
  const seen =
    answer.rcode === "NXDOMAIN"
      ? `No DNS record exists for ${hostname} yet (NXDOMAIN).`
      : `${hostname} exists but has no ${apex ? "A or AAAA" : "CNAME, A or AAAA"} record${unrelated.length ? ` (only ${list([...new Set(unrelated.map((r) => r.type))])})` : ""} (NODATA).`;
  const todo = apex
    ? `Create an ALIAS record (also called ANAME or a flattened CNAME) at ${hostname} pointing to ${target}; if your DNS provider has none, use a subdomain such as www.${hostname} with a CNAME instead.`
    : `Create CNAME ${hostname} → ${target}.`;
  return {
    result: "no_record",
    code: "NO_RECORD",
    message: `${seen} ${todo} The domain stays pending until the record is visible.`,
  };
}

async function checkApex(resolver: DnsResolver, domain: DomainUnderCheck): Promise<CheckResult> {
  const { hostname, target } = domain;
  const [a, aaaa, ours] = await Promise.all([
    resolver.resolve(hostname, "A"),
    resolver.resolve(hostname, "AAAA"),
    targetAddresses(resolver, target),
  ]);
  const all = [...a.records, ...aaaa.records];
  // A CNAME at an apex breaks the zone's SOA/NS, yet some providers allow it: judge it as a CNAME.
  const chain = chainFrom(hostname, all);
  if (chain.length > 0)
    return cnameOutcome(
      domain,
      all.filter((r) => r.type === "CNAME" && r.name === hostname),
      chain,
      [],
    );
  const addresses = addressesOf(hostname, a, aaaa);
  if (addresses.length === 0) return noRecord(domain, a, []);
  if (ours.size === 0) return unavailable(`the service's own target ${target} resolved to no address`);
  const foreign = addresses.filter((r) => !ours.has(r.data));
  if (foreign.length === 0) return { result: "validated", via: "flattened" };
  if (foreign.length === addresses.length) {
    return {
      result: "misconfigured",
      code: "WRONG_TARGET",
      message: `${hostname} points to ${describe(foreign)}, not to ${target} (${list([...ours])}). Replace the A/AAAA records at ${hostname} with an ALIAS (or flattened CNAME) to ${target}.${cacheHint(foreign)}`,
    };
  }
  return {
    result: "misconfigured",
    code: "CONFLICTING_RECORDS",
    message: `${hostname} has the addresses of ${target} but also ${describe(foreign)}. Remove the A/AAAA record(s) that do not come from the ALIAS.${cacheHint(foreign)}`,
  };
}
