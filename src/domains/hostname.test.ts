import { describe, expect, it } from "vitest";
import { checkHostname, normaliseHostname } from "./hostname";

const rules = { serviceDomain: "service.test", apiHostnames: new Set(["api.service.test", "localhost"]) };
const reason = (input: string) => {
  const result = checkHostname(input, rules);
  return result.ok ? null : result.reason;
};

describe("normalising hostnames", () => {
  it.each([
    ["API.Example.COM", "api.example.com"],
    ["api.example.com.", "api.example.com"],
    ["  api.example.com  ", "api.example.com"],
    ["bücher.example", "xn--bcher-kva.example"],
    ["BÜCHER.example.", "xn--bcher-kva.example"],
    ["xn--bcher-kva.example", "xn--bcher-kva.example"],
  ])("%s → %s", (input, expected) => {
    expect(normaliseHostname(input)).toBe(expected);
    const result = checkHostname(input, rules);
    expect(result.ok && result.hostname).toBe(expected);
  });

  it("tells an apex from a subdomain with the Public Suffix List", () => {
    expect(checkHostname("example.co.uk", rules)).toMatchObject({ ok: true, apex: true });
    expect(checkHostname("www.example.co.uk", rules)).toMatchObject({
      ok: true,
      apex: false,
      registrableDomain: "example.co.uk",
    });
    expect(checkHostname("apex.test", rules)).toMatchObject({ ok: true, apex: true });
    expect(checkHostname("good.example.test", rules)).toMatchObject({ ok: true, apex: false });
    // The private section too: foo.github.io is its own zone apex.
    expect(checkHostname("foo.github.io", rules)).toMatchObject({ ok: true, apex: true });
  });
});

describe("refusing what cannot be a custom domain, with the reason", () => {
  it.each([
    ["192.0.2.1", /IP address/],
    ["0x7f.1", /IP address/],
    ["[2001:db8::1]", /IP address/],
    ["2001:db8::1", /IP address/],
    ["*.example.com", /wildcard/],
    ["a..example.com", /empty label/],
    [".example.com", /empty label/],
    [`${"a".repeat(64)}.example.com`, /64 characters.*at most 63/],
    [`${"a.".repeat(127)}com`, /at most 253/],
    ["exa_mple.com", /label 'exa_mple'/],
    ["-bad.example.com", /label '-bad'/],
    ["localhost", /single label|special-use/],
    ["printer.local", /special-use/],
    ["com", /single label/],
    ["co.uk", /public suffix/],
    ["github.io", /public suffix/],
    ["service.test", /belongs to this service/],
    ["proxy.aws.us-east-1.service.test", /belongs to this service/],
    ["API.Service.Test.", /belongs to this service/],
    ["", /not a hostname/],
    ["https://example.com/path", /not a hostname/],
    ["user@example.com", /not a hostname/],
  ])("%s", (input, expected) => {
    expect(reason(input)).toMatch(expected);
  });
});
