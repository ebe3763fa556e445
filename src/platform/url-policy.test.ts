import { describe, expect, it } from "vitest";
import { checkOutboundUrl } from "./url-policy";

const strict = { allowInsecure: false };
const dev = { allowInsecure: true };

describe("outbound URL policy (webhook receivers and app origins)", () => {
  it.each([
    "https://hooks.example.com/receive",
    "https://hooks.example.com:8443/x?y=1",
    "https://8.8.8.8/hook",
    "https://[2606:4700:4700::1111]/hook",
    "https://xn--bcher-kva.example/hook",
  ])("accepts %s", (url) => {
    expect(checkOutboundUrl(url, strict).ok).toBe(true);
  });

  it.each([
    ["http://hooks.example.com/", /https/],
    ["ftp://hooks.example.com/", /https/],
    ["not a url", /absolute URL/],
    ["/relative/path", /absolute URL/],
    ["https://user:pass@hooks.example.com/", /user name/],
    ["https://user@hooks.example.com/", /user name/],
    ["https://localhost/", /localhost|loopback/],
    ["https://LOCALHOST./", /localhost|loopback/],
    ["https://api.localhost/", /localhost|loopback/],
    ["https://receiver/", /fully qualified/],
    [`https://example.com/${"a".repeat(2100)}`, /2048/],
  ])("refuses %s", (url, reason) => {
    const check = checkOutboundUrl(url, strict);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.reason).toMatch(reason);
  });

  // Every spelling the URL parser accepts ends up as one address; each range is refused.
  it.each([
    "127.0.0.1",
    "127.1",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "2130706433",
    "0x7f000001",
    "10.0.0.1",
    "10.255.255.255",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "100.64.0.1",
    "100.127.255.255",
    "169.254.169.254",
    "0.0.0.0",
    "0",
    "192.0.0.8",
    "192.0.2.1",
    "198.18.0.1",
    "198.51.100.7",
    "203.0.113.9",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::ffff:10.0.0.1]",
    "[::127.0.0.1]",
    "[64:ff9b::a00:1]",
    "[fc00::1]",
    "[fd12:3456::1]",
    "[fe80::1]",
    "[fec0::1]",
    "[ff02::1]",
    "[2001:db8::1]",
    "[2001::1]",
    "[2002:7f00:1::1]",
    "[100::1]",
  ])("refuses the IP literal %s", (host) => {
    const check = checkOutboundUrl(`https://${host}/hook`, strict);
    expect(check.ok).toBe(false);
  });

  it("allows http and loopback only under ALLOW_INSECURE_TARGETS, never private ranges", () => {
    expect(checkOutboundUrl("http://127.0.0.1:8787/hook", dev).ok).toBe(true);
    expect(checkOutboundUrl("http://localhost:8787/hook", dev).ok).toBe(true);
    expect(checkOutboundUrl("http://[::1]:8787/hook", dev).ok).toBe(true);
    expect(checkOutboundUrl("http://127.0.0.1:8787/hook", strict).ok).toBe(false);
    expect(checkOutboundUrl("http://10.0.0.1/hook", dev).ok).toBe(false);
    expect(checkOutboundUrl("http://169.254.169.254/latest/meta-data", dev).ok).toBe(false);
    expect(checkOutboundUrl("http://user:pw@127.0.0.1/", dev).ok).toBe(false);
  });
});
