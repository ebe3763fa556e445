import { parse } from "tldts";

/** Names public DNS never resolves (RFC 6761 and its successors): no certificate can be issued for them. */
const SPECIAL_USE_TLDS = new Set(["localhost", "local", "invalid", "internal", "onion", "arpa", "alt"]);
const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

export type HostnameCheck =
  { ok: true; hostname: string; apex: boolean; registrableDomain: string } | { ok: false; reason: string };

export interface HostnameRules {
  serviceDomain: string;
  apiHostnames: ReadonlySet<string>;
}

/**
 * Lower case, no trailing dot, IDN to punycode (the WHATWG URL host parser, UTS #46), or null when
 * the text cannot be a hostname at all. Used on input and on path parameters alike.
 */
export function normaliseHostname(input: string): string | null {
  const text = input.trim();
  if (text === "" || text.length > 1000 || /[/?#@:\\[\]\s%]/.test(text)) return null;
  try {
    const host = new URL(`http://${text}/`).hostname.toLowerCase();
    return host.endsWith(".") ? host.slice(0, -1) : host;
  } catch {
    return null;
  }
}

/**
 * Whether `input` may be a custom domain, and if so its normal form and whether it is an apex
 * (a registrable domain, found with the Public Suffix List, private section included since
 * names like `foo.eu.org` are zone apexes too). Every refusal says why, in words for the user.
 */
export function checkHostname(input: string, rules: HostnameRules): HostnameCheck {
  const raw = input.trim();
  if (raw.includes("*")) return { ok: false, reason: "wildcards are not supported; add each hostname on its own" };
  if (/^\[|^[0-9a-f]*:[0-9a-f:.]*$/i.test(raw)) return { ok: false, reason: "is an IP address; use a hostname" };
  const hostname = normaliseHostname(raw);
  if (hostname === null) return { ok: false, reason: "is not a hostname (letters, digits, hyphens and dots only)" };
  if (IPV4.test(hostname)) return { ok: false, reason: "is an IP address; use a hostname" };
  if (hostname.length > 253)
    return { ok: false, reason: `is ${hostname.length} characters long; a hostname has at most 253` };
  const labels = hostname.split(".");
  if (labels.some((label) => label.length === 0))
    return { ok: false, reason: "has an empty label (two dots in a row, or a leading dot)" };
  const long = labels.find((label) => label.length > 63);
  if (long) return { ok: false, reason: `has a label of ${long.length} characters; a label has at most 63` };
  const bad = labels.find((label) => !LABEL.test(label));
  if (bad) return { ok: false, reason: `has the label '${bad}'; labels are letters, digits and inner hyphens` };
  if (labels.length < 2)
    return { ok: false, reason: "is a single label; use a fully qualified name such as app.example.com" };
  if (SPECIAL_USE_TLDS.has(labels.at(-1)!))
    return {
      ok: false,
      reason: `is under the special-use name '.${labels.at(-1)}', which public DNS does not resolve`,
    };
  const service = rules.serviceDomain;
  if (hostname === service || hostname.endsWith(`.${service}`) || rules.apiHostnames.has(hostname)) {
    return { ok: false, reason: `belongs to this service (${service}); use a domain you own` };
  }
  const parsed = parse(hostname, { allowPrivateDomains: true, extractHostname: false });
  if (!parsed.domain) {
    return {
      ok: false,
      reason: `is a public suffix (like ${parsed.publicSuffix ?? hostname}), under which anyone may register; use a domain you own`,
    };
  }
  return { ok: true, hostname, apex: parsed.domain === hostname, registrableDomain: parsed.domain };
}
