import { v6Groups } from "./url-policy";

/**
 * The key an address is counted under, wherever one is (the forged-token budget, the management API's
 * per-address limit, the dashboard's sign-in throttle): an IPv4 address by itself, an IPv6 address by
 * its /64. One IPv6 subscriber is handed a /64 (or more): counting `…::1`, `…::2`, … apart gave each
 * caller 2^64 budgets. An IPv4-mapped IPv6 address counts as its IPv4 address. Anything that is no
 * address (Cloudflare sets `CF-Connecting-IP`; local tools may not) is counted as the text it is,
 * cut to 64 characters.
 */
export function addressKey(raw: string): string {
  const text = raw.trim();
  if (!text.includes(":")) return text.slice(0, 64);
  let printed: string;
  try {
    // The URL parser reads every spelling of an IPv6 address (zero runs, embedded IPv4, case) and
    // prints one; a zone id or anything else is no address.
    printed = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return text.slice(0, 64);
  }
  const groups = v6Groups(printed);
  if (!groups) return text.slice(0, 64);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    const [high, low] = [groups[6]!, groups[7]!];
    return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
  }
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(":")}::/64`;
}
