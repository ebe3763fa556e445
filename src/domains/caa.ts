import { getDomain } from "tldts";
import type { DnsRecord, DnsResolver } from "./dns";

/**
 * The certificate authorities a custom hostname's certificate may come from, by the name Cloudflare
 * for SaaS takes as `ssl.certificate_authority`, with the issuer domain CAA records name them by
 * (RFC 8659 section 4.2).
 */
export const CERTIFICATE_AUTHORITIES = {
  lets_encrypt: { label: "Let's Encrypt", caa: "letsencrypt.org" },
  google: { label: "Google Trust Services", caa: "pki.goog" },
  ssl_com: { label: "SSL.com", caa: "ssl.com" },
} as const;
export type CertificateAuthority = keyof typeof CERTIFICATE_AUTHORITIES;

/**
 * CAA lookups one check makes at most (the hostname and its parents up to the registrable domain).
 * Deeper names skip middle labels but always ask the registrable domain, where CAA records usually live.
 */
export const MAX_CAA_LOOKUPS = 4;

// Properties RFC 8659 and its extensions define; an unknown one flagged critical forbids issuance.
const KNOWN_TAGS = new Set(["issue", "issuewild", "iodef", "issuemail", "contactemail", "contactphone", "issuevmc"]);

export type CaaVerdict = { allowed: true } | { allowed: false; message: string };

interface CaaProperty {
  critical: boolean;
  tag: string;
  value: string;
}

/** `flags tag "value"` as src/domains/dns.ts renders a CAA record; null for anything else. */
function parse(record: DnsRecord): CaaProperty | null {
  const match = /^(\d+) ([a-z0-9]+) "(.*)"$/s.exec(record.data);
  if (!match) return null;
  return { critical: (Number(match[1]) & 128) !== 0, tag: match[2]!, value: match[3]! };
}

/** The names whose CAA sets decide for `hostname`, nearest first (RFC 8659 section 3, tree climbing). */
export function caaNames(hostname: string): string[] {
  const apex = getDomain(hostname, { allowPrivateDomains: true }) ?? hostname;
  const names: string[] = [];
  for (let name = hostname; ; name = name.slice(name.indexOf(".") + 1)) {
    names.push(name);
    if (name === apex || !name.includes(".")) break;
  }
  return names.length <= MAX_CAA_LOOKUPS ? names : [...names.slice(0, MAX_CAA_LOOKUPS - 1), names.at(-1)!];
}

const issuerOf = (value: string) => value.split(";")[0]!.trim().toLowerCase();

/** Whether a relevant CAA set lets `authority` issue for a (non-wildcard) name; the reason when not. */
export function judgeCaa(
  hostname: string,
  at: string,
  records: DnsRecord[],
  authority: CertificateAuthority,
): CaaVerdict {
  const ca = CERTIFICATE_AUTHORITIES[authority];
  const properties = records.map(parse).filter((p): p is CaaProperty => p !== null);
  const shown = records.map((r) => `${at} CAA ${r.data}`).join(", ");
  const fix = `Add the record ${at} CAA 0 issue "${ca.caa}" beside the ones you have, or remove the CAA records, then validate again.`;
  const critical = properties.find((p) => p.critical && !KNOWN_TAGS.has(p.tag));
  if (critical) {
    return {
      allowed: false,
      message: `${shown}: the property '${critical.tag}' is marked critical and unknown to certificate authorities, so none may issue a certificate for ${hostname}. Remove that record or clear its critical flag, then validate again.`,
    };
  }
  const issue = properties.filter((p) => p.tag === "issue");
  if (issue.length === 0 || issue.some((p) => issuerOf(p.value) === ca.caa)) return { allowed: true };
  const allowed = [...new Set(issue.map((p) => issuerOf(p.value)).filter(Boolean))];
  return {
    allowed: false,
    message: `${shown}: ${allowed.length ? `only ${allowed.join(", ")} may issue certificates` : "no certificate authority may issue certificates"} for ${hostname}, but this gateway's certificates come from ${ca.label} (${ca.caa}). ${fix}`,
  };
}

/**
 * RFC 8659: the first non-empty CAA set, climbing from the hostname to its registrable domain,
 * decides. A CNAME at a name is followed by the resolver, so the records may carry the target's name.
 * Resolver failures propagate (ResolverError): an unknown CAA set decides nothing.
 */
export async function checkCaa(
  resolver: DnsResolver,
  hostname: string,
  authority: CertificateAuthority,
): Promise<CaaVerdict> {
  for (const name of caaNames(hostname)) {
    const answer = await resolver.resolve(name, "CAA");
    const records = answer.records.filter((r) => r.type === "CAA");
    if (records.length > 0) return judgeCaa(hostname, name, records, authority);
  }
  return { allowed: true };
}
