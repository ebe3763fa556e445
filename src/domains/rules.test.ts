import { describe, expect, it } from "vitest";
import { craftedResolver, noerror, rr, TARGET, targetZone } from "../../test/domains";
import { ResolverError } from "./dns";
import { checkDomain, MAX_QUERIES_PER_CHECK } from "./rules";

const sub = "api.customer.example";
const apex = "customer.example";
const domain = (hostname: string, isApex = false, region = "us-east-1") => ({
  hostname,
  apex: isApex,
  target: `proxy.aws.${region}.service.test`,
  region,
  serviceDomain: "service.test",
});

describe("subdomain rules (CNAME expected)", () => {
  it("validates one CNAME equal to the target", async () => {
    const cname = noerror(rr(sub, "CNAME", TARGET));
    const resolver = craftedResolver({ [sub]: { CNAME: cname, A: cname, AAAA: cname, ANY: cname } });
    expect(await checkDomain(resolver, domain(sub))).toEqual({ result: "validated", via: "cname" });
  });

  it("validates a CNAME chain through the customer's own alias that reaches the target", async () => {
    const chain = noerror(rr(sub, "CNAME", "alias.customer.example"), rr("alias.customer.example", "CNAME", TARGET));
    const resolver = craftedResolver({ [sub]: { CNAME: noerror(chain.records[0]!), A: chain, AAAA: chain } });
    expect(await checkDomain(resolver, domain(sub))).toEqual({ result: "validated", via: "cname_chain" });
  });

  it("fails a CNAME to anything else: WRONG_TARGET saying what it points to, what is expected, and the cache delay", async () => {
    const cname = noerror(rr(sub, "CNAME", "old-host.herokudns.com", 3600));
    const resolver = craftedResolver({ [sub]: { CNAME: cname, A: cname, AAAA: cname } });
    const outcome = await checkDomain(resolver, domain(sub));
    expect(outcome).toMatchObject({ result: "misconfigured", code: "WRONG_TARGET" });
    const message = (outcome as { message: string }).message;
    expect(message).toContain(`has a CNAME to old-host.herokudns.com, but it must point to ${TARGET}`);
    expect(message).toContain("Change the record's value");
    expect(message).toContain("up to 3600 s");
  });

  it("names the region when the CNAME points to another region's target", async () => {
    const other = "proxy.aws.eu-west-2.service.test";
    const cname = noerror(rr(sub, "CNAME", other));
    const resolver = craftedResolver({ [sub]: { CNAME: cname, A: cname, AAAA: cname } });
    const outcome = await checkDomain(resolver, domain(sub));
    expect(outcome).toMatchObject({ code: "WRONG_TARGET" });
    expect((outcome as { message: string }).message).toContain(
      "target of region eu-west-2, but this domain was created for region us-east-1",
    );
  });

  it("fails several CNAMEs at one name: CONFLICTING_RECORDS", async () => {
    const two = noerror(rr(sub, "CNAME", TARGET), rr(sub, "CNAME", "elsewhere.example"));
    const resolver = craftedResolver({ [sub]: { CNAME: two, A: two, AAAA: two } });
    const outcome = await checkDomain(resolver, domain(sub));
    expect(outcome).toMatchObject({ result: "misconfigured", code: "CONFLICTING_RECORDS" });
    expect((outcome as { message: string }).message).toMatch(/2 CNAME records .*Remove all but the CNAME to proxy/);
  });

  it("fails a CNAME beside other data (seen through ANY): CONFLICTING_RECORDS naming the extra records", async () => {
    const cname = noerror(rr(sub, "CNAME", TARGET));
    const resolver = craftedResolver({
      [sub]: { CNAME: cname, A: cname, AAAA: cname, ANY: noerror(rr(sub, "A", "203.0.113.50")) },
    });
    const outcome = await checkDomain(resolver, domain(sub));
    expect(outcome).toMatchObject({ code: "CONFLICTING_RECORDS" });
    expect((outcome as { message: string }).message).toContain("also A 203.0.113.50");
  });

  it("fails A/AAAA records where the CNAME should be: CONFLICTING_RECORDS listing them", async () => {
    const resolver = craftedResolver({
      ...targetZone,
      [sub]: {
        CNAME: noerror(),
        A: noerror(rr(sub, "A", "203.0.113.50"), rr(sub, "A", "203.0.113.51")),
        AAAA: noerror(rr(sub, "AAAA", "2001:db8:bad::50")),
      },
    });
    const outcome = await checkDomain(resolver, domain(sub));
    expect(outcome).toMatchObject({ code: "CONFLICTING_RECORDS" });
    expect((outcome as { message: string }).message).toContain(
      "A 203.0.113.50, A 203.0.113.51, AAAA 2001:db8:bad::50 where the CNAME should be",
    );
  });

  it("validates a subdomain whose provider flattens the CNAME into the target's own addresses", async () => {
    const resolver = craftedResolver({
      ...targetZone,
      [sub]: { CNAME: noerror(), A: noerror(rr(sub, "A", "192.0.2.11")), AAAA: noerror() },
    });
    expect(await checkDomain(resolver, domain(sub))).toEqual({ result: "validated", via: "flattened" });
    // The costliest check there is: within the budget the cron plans with.
    expect(resolver.queries).toHaveLength(MAX_QUERIES_PER_CHECK);
  });

  it("keeps NXDOMAIN pending: NO_RECORD with the record to create", async () => {
    const outcome = await checkDomain(craftedResolver({}), domain(sub));
    expect(outcome).toMatchObject({ result: "no_record", code: "NO_RECORD" });
    expect((outcome as { message: string }).message).toContain(
      `No DNS record exists for ${sub} yet (NXDOMAIN). Create CNAME ${sub} → ${TARGET}`,
    );
  });

  it("keeps NODATA pending, saying which unrelated records exist", async () => {
    const resolver = craftedResolver({
      [sub]: { CNAME: noerror(), A: noerror(), AAAA: noerror(), ANY: noerror(rr(sub, "TXT", "v=spf1 -all")) },
    });
    const outcome = await checkDomain(resolver, domain(sub));
    expect(outcome).toMatchObject({ result: "no_record" });
    expect((outcome as { message: string }).message).toContain("has no CNAME, A or AAAA record (only TXT) (NODATA)");
  });

  it("treats a resolver failure as DNS_UNAVAILABLE, never as a verdict", async () => {
    const resolver = craftedResolver({ [sub]: { A: new ResolverError("the resolver answered SERVFAIL") } });
    const outcome = await checkDomain(resolver, domain(sub));
    expect(outcome).toMatchObject({ result: "unavailable", code: "DNS_UNAVAILABLE" });
    expect((outcome as { message: string }).message).toContain("SERVFAIL. Nothing changed");
  });

  it("ignores a failed ANY query (many resolvers refuse ANY)", async () => {
    const cname = noerror(rr(sub, "CNAME", TARGET));
    const resolver = craftedResolver({
      [sub]: { CNAME: cname, A: cname, AAAA: cname, ANY: new ResolverError("NOTIMP") },
    });
    expect(await checkDomain(resolver, domain(sub))).toMatchObject({ result: "validated" });
  });
});

describe("apex rules (ALIAS / flattened expected)", () => {
  it("validates an apex whose A/AAAA set equals the target's", async () => {
    const resolver = craftedResolver({
      ...targetZone,
      [apex]: {
        A: noerror(rr(apex, "A", "192.0.2.10"), rr(apex, "A", "192.0.2.11")),
        AAAA: noerror(rr(apex, "AAAA", "2001:db8::10")),
      },
    });
    expect(await checkDomain(resolver, domain(apex, true))).toEqual({ result: "validated", via: "flattened" });
  });

  it("validates an apex whose addresses are a subset of the target's (a flattening provider may return fewer)", async () => {
    const resolver = craftedResolver({
      ...targetZone,
      [apex]: { A: noerror(rr(apex, "A", "192.0.2.10")), AAAA: noerror() },
    });
    expect(await checkDomain(resolver, domain(apex, true))).toMatchObject({ result: "validated" });
  });

  it("fails an apex pointing elsewhere: WRONG_TARGET with the addresses seen and expected", async () => {
    const resolver = craftedResolver({
      ...targetZone,
      [apex]: { A: noerror(rr(apex, "A", "203.0.113.50")), AAAA: noerror() },
    });
    const outcome = await checkDomain(resolver, domain(apex, true));
    expect(outcome).toMatchObject({ code: "WRONG_TARGET" });
    expect((outcome as { message: string }).message).toContain(
      `points to A 203.0.113.50, not to ${TARGET} (192.0.2.10, 192.0.2.11, 2001:db8::10)`,
    );
    expect((outcome as { message: string }).message).toContain("ALIAS");
  });

  it("fails an apex with our addresses plus others: CONFLICTING_RECORDS", async () => {
    const resolver = craftedResolver({
      ...targetZone,
      [apex]: { A: noerror(rr(apex, "A", "192.0.2.10"), rr(apex, "A", "203.0.113.9")), AAAA: noerror() },
    });
    const outcome = await checkDomain(resolver, domain(apex, true));
    expect(outcome).toMatchObject({ code: "CONFLICTING_RECORDS" });
    expect((outcome as { message: string }).message).toContain("also A 203.0.113.9");
  });

  it("keeps an apex with no address pending, advising ALIAS or a subdomain", async () => {
    const resolver = craftedResolver({ ...targetZone, [apex]: { A: noerror(), AAAA: noerror() } });
    const outcome = await checkDomain(resolver, domain(apex, true));
    expect(outcome).toMatchObject({ result: "no_record", code: "NO_RECORD" });
    expect((outcome as { message: string }).message).toMatch(/ALIAS record .* www\.customer\.example with a CNAME/);
  });

  it("does not judge an apex when the service's own target does not resolve", async () => {
    const resolver = craftedResolver({ [apex]: { A: noerror(rr(apex, "A", "192.0.2.10")), AAAA: noerror() } });
    expect(await checkDomain(resolver, domain(apex, true))).toMatchObject({
      result: "unavailable",
      code: "DNS_UNAVAILABLE",
    });
  });

  it("judges a (non-standard) CNAME at an apex like a subdomain's", async () => {
    const cname = noerror(rr(apex, "CNAME", TARGET));
    const resolver = craftedResolver({ ...targetZone, [apex]: { A: cname, AAAA: cname } });
    expect(await checkDomain(resolver, domain(apex, true))).toMatchObject({ result: "validated", via: "cname" });
  });
});

describe("resolver answers the rules do not trust", () => {
  it("NXDOMAIN with a dangling CNAME is still judged by the CNAME", async () => {
    const dangling = { rcode: "NXDOMAIN" as const, records: [rr(sub, "CNAME", "gone.example")] };
    const resolver = craftedResolver({ [sub]: { CNAME: noerror(dangling.records[0]!), A: dangling, AAAA: dangling } });
    expect(await checkDomain(resolver, domain(sub))).toMatchObject({ code: "WRONG_TARGET" });
  });
});
