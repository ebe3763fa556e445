import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { TARGET } from "../../test/domains";
import { DohResolver, ResolverError } from "./dns";

// The real DNS server (knot behind dnsdist) that test/global/dns-harness.mjs makes sure is running.
const harness = new DohResolver(env.DNS_RESOLVER_URL!);
const fake = (mode: string, timeoutMs = 5_000) => new DohResolver(`${env.TEST_FAKES_URL}/doh/${mode}`, timeoutMs);

describe("DoH client (RFC 8484 wire format) against a real DNS server", () => {
  it("reads a CNAME", async () => {
    const answer = await harness.resolve("good.example.test", "CNAME");
    expect(answer).toEqual({
      rcode: "NOERROR",
      records: [{ name: "good.example.test", type: "CNAME", ttl: 60, data: TARGET }],
    });
  });

  it("reads A and AAAA sets", async () => {
    const a = await harness.resolve("apex.test", "A");
    expect(a.records.map((r) => r.data).sort()).toEqual(["192.0.2.10", "192.0.2.11"]);
    const aaaa = await harness.resolve("apex.test", "AAAA");
    expect(aaaa.records.map((r) => r.data)).toEqual(["2001:db8::10"]);
  });

  it("tells NXDOMAIN from NODATA", async () => {
    expect(await harness.resolve("no-such-name.example.test", "CNAME")).toEqual({ rcode: "NXDOMAIN", records: [] });
    expect(await harness.resolve("txt-only.example.test", "CNAME")).toEqual({ rcode: "NOERROR", records: [] });
  });

  it("sends names in any case and with a trailing dot", async () => {
    const answer = await harness.resolve("Good.Example.Test.", "A");
    expect(answer.records[0]).toMatchObject({ type: "CNAME", data: TARGET });
  });
});

describe("DoH client: every unusable answer is a ResolverError that says why", () => {
  it.each([
    ["servfail", /answered SERVFAIL/],
    ["garbage", /not a valid DNS message/],
    ["http500", /answered HTTP 500/],
    ["html", /text\/html, not application\/dns-message/],
    ["mismatch", /does not match the question/],
  ])("%s", async (mode, message) => {
    const error = await fake(mode)
      .resolve("good.example.test", "A")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResolverError);
    expect((error as Error).message).toMatch(message);
  });

  it("times out", async () => {
    const error = await fake("slow", 200)
      .resolve("good.example.test", "A")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResolverError);
    expect((error as Error).message).toMatch(/did not answer within 200 ms/);
  });
});
