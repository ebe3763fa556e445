/**
 * Where the gateway may send requests on a customer's behalf (webhook receivers, app origins):
 * the SSRF rules of docs/webhook-receivers.md. The WHATWG URL parser has already turned every IPv4 spelling
 * (`0x7f.1`, `2130706433`, `127.1`) into dotted decimal and every IPv6 one into its short form,
 * so checking the parsed hostname covers them all.
 */
export type OutboundUrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

export interface OutboundUrlPolicy {
  /** `ALLOW_INSECURE_TARGETS`: also `http:` and loopback, for local development. */
  allowInsecure: boolean;
}

export const MAX_OUTBOUND_URL_LENGTH = 2048;

// Ranges that are not publicly routable: "this network", private, CGNAT, loopback, link-local,
// IETF protocol assignments, documentation, 6to4 relay, benchmarking, multicast, reserved, broadcast.
const BLOCKED_V4: [string, number][] = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];

const DOTTED_QUAD = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function v4ToInt(address: string): number | null {
  const m = DOTTED_QUAD.exec(address);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return null;
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
}

function inV4Range(value: number, [base, bits]: [string, number]): boolean {
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return (value & mask) >>> 0 === (v4ToInt(base)! & mask) >>> 0;
}

/** The 8 groups of an IPv6 address as the URL parser prints it (compressed, no embedded IPv4). */
export function v6Groups(address: string): number[] | null {
  const [head = "", tail] = address.split("::");
  const parse = (part: string) => (part ? part.split(":").map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  const groups =
    tail === undefined ? left : [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

type AddressKind = "public" | "loopback" | "blocked";

function classifyV4(address: string): AddressKind | null {
  const value = v4ToInt(address);
  if (value === null) return null;
  if (inV4Range(value, ["127.0.0.0", 8])) return "loopback";
  if (value === 0xffffffff || BLOCKED_V4.some((range) => inV4Range(value, range))) return "blocked";
  return "public";
}

function classifyV6(address: string): AddressKind {
  const g = v6Groups(address);
  if (!g) return "blocked";
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return "loopback";
  // Only global unicast (2000::/3) is routable; inside it, 2001::/23 (Teredo and other IETF
  // assignments), 2001:db8::/32 and 3fff::/20 (documentation) and 2002::/16 (6to4, which embeds
  // any IPv4 address) are not. Everything else (::, IPv4-mapped, NAT64, ULA, link-local, multicast) is.
  const first = g[0]!;
  if ((first & 0xe000) !== 0x2000) return "blocked";
  if (first === 0x2001 && g[1]! < 0x200) return "blocked";
  if (first === 0x2001 && g[1] === 0xdb8) return "blocked";
  if (first === 0x2002) return "blocked";
  if ((first & 0xfff0) === 0x3ff0) return "blocked";
  return "public";
}

function classifyHost(hostname: string): AddressKind | "single_label" {
  if (hostname.startsWith("[")) return classifyV6(hostname.slice(1, -1));
  const v4 = classifyV4(hostname);
  if (v4) return v4;
  if (hostname === "localhost" || hostname.endsWith(".localhost")) return "loopback";
  if (!hostname.includes(".")) return "single_label";
  return "public";
}

/** Whether the gateway may send to `raw`; when not, a reason fit for a 400's field error. */
export function checkOutboundUrl(raw: string, policy: OutboundUrlPolicy): OutboundUrlCheck {
  if (raw.length > MAX_OUTBOUND_URL_LENGTH)
    return { ok: false, reason: `must be at most ${MAX_OUTBOUND_URL_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: "is not an absolute URL" };
  }
  const insecureNote = policy.allowInsecure ? "" : " (http: only when ALLOW_INSECURE_TARGETS is set)";
  if (url.protocol !== "https:" && !(policy.allowInsecure && url.protocol === "http:")) {
    return { ok: false, reason: `must use https:${insecureNote}` };
  }
  if (url.username || url.password) return { ok: false, reason: "must not contain a user name or password" };
  // One trailing dot is the root label (fully qualified); any other empty label (`10.0.0.1..`,
  // `a..b`, `.a`) is not a host name, and stripping dots one at a time would turn `10.0.0.1..`
  // into an address the IPv4 check never sees.
  const hostname = url.hostname.toLowerCase().replace(/\.$/, "");
  if (!hostname.startsWith("[") && hostname.split(".").some((label) => label === "")) {
    return { ok: false, reason: "must not have an empty label in its host name" };
  }
  switch (classifyHost(hostname)) {
    case "public":
      return { ok: true, url };
    case "loopback":
      return policy.allowInsecure
        ? { ok: true, url }
        : { ok: false, reason: "must not point to localhost or a loopback address" };
    case "single_label":
      return { ok: false, reason: "must use a fully qualified host name" };
    case "blocked":
      return { ok: false, reason: "must not point to a private, link-local, reserved or multicast address" };
  }
}
