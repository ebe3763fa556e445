import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { HALF_HOUR, read, world } from "../../test/cron-world";
import {
  addDomain,
  caa,
  craftedResolver,
  noerror,
  pointsHere,
  rr,
  setRecords,
  uniqueLabel,
  validate,
  ZONE,
  zonesResolver,
} from "../../test/domains";
import { client, seedProject, testDeps } from "../../test/helpers";
import { QUEUES } from "../platform/triggers";
import { createWorker } from "../worker";
import { caaNames, checkCaa } from "./caa";
import { FIRST_ATTEMPT_DELAY_S } from "./first-attempt";

const zones = client({ resolver: zonesResolver });
const host = (prefix = "d") => `${uniqueLabel(prefix)}.${ZONE}`;

describe("validation against DNS the test writes (private knot + dnsdist)", () => {
  it("validates an uncontested hostname with the CNAME alone, no ownership record needed", async () => {
    const seed = await seedProject(zones);
    const name = host("alone");
    expect((await addDomain(zones, seed, name)).body).toMatchObject({ ownership_required: false });
    expect((await validate(zones, seed, name)).body).toMatchObject({
      status: "pending",
      last_error: { code: "NO_RECORD" },
    });
    await setRecords(name, pointsHere);
    expect((await validate(zones, seed, name)).body).toMatchObject({
      status: "validated",
      last_error: null,
      certificate_status: "active",
    });
  });

  it("fails with CAA_BLOCKS_CERTIFICATE when a parent's CAA forbids the CA, naming the record and the fix; passes once it allows it", async () => {
    const seed = await seedProject(zones);
    const parent = host("caa");
    const name = `www.${parent}`;
    await setRecords(name, pointsHere);
    await setRecords(parent, caa('0 issue "digicert.com"'), caa('0 iodef "mailto:security@example.com"'));
    await addDomain(zones, seed, name);
    const blocked = await validate(zones, seed, name);
    expect(blocked.body).toMatchObject({ status: "failed", last_error: { code: "CAA_BLOCKS_CERTIFICATE" } });
    expect(blocked.body.last_error!.message).toContain(`${parent} CAA 0 issue "digicert.com"`);
    expect(blocked.body.last_error!.message).toContain(`Add the record ${parent} CAA 0 issue "letsencrypt.org"`);

    // The nearest CAA set decides: `issue ";"` (no CA at all) below a parent that allows ours.
    await setRecords(parent, caa('0 issue "letsencrypt.org"'));
    const nearer = `www.mid.${parent}`;
    await setRecords(nearer, pointsHere);
    await setRecords(`mid.${parent}`, caa('0 issue ";"'));
    await addDomain(zones, seed, nearer);
    const none = await validate(zones, seed, nearer);
    expect(none.body).toMatchObject({ status: "failed", last_error: { code: "CAA_BLOCKS_CERTIFICATE" } });
    expect(none.body.last_error!.message).toContain("no certificate authority may issue");

    expect((await validate(zones, seed, name)).body).toMatchObject({ status: "validated", last_error: null });
  });
});

describe("CAA rules (RFC 8659)", () => {
  const caaAt = (name: string, ...data: string[]) => ({ CAA: noerror(...data.map((d) => rr(name, "CAA", d))) });

  it("climbs from the hostname to the registrable domain, at most 4 names, always asking the registrable domain", () => {
    expect(caaNames("api.example.com")).toEqual(["api.example.com", "example.com"]);
    expect(caaNames("example.co.uk")).toEqual(["example.co.uk"]);
    expect(caaNames("a.b.c.d.example.com")).toEqual([
      "a.b.c.d.example.com",
      "b.c.d.example.com",
      "c.d.example.com",
      "example.com",
    ]);
  });

  it.each([
    ["no CAA anywhere", [], true],
    ["the CA among several", ['0 issue "digicert.com"', '0 issue "letsencrypt.org; validationmethods=http-01"'], true],
    [
      "only issuewild (not for this name) and iodef",
      ['0 issuewild "digicert.com"', '0 iodef "mailto:a@example.com"'],
      true,
    ],
    ["another CA only", ['0 issue "digicert.com"'], false],
    ['issue ";" (no CA at all)', ['0 issue ";"'], false],
    ["an unknown property flagged critical", ['0 issue "letsencrypt.org"', '128 tbs "x"'], false],
  ])("%s", async (_label, data, allowed) => {
    const resolver = craftedResolver({ "example.com": data.length ? caaAt("example.com", ...data) : {} });
    expect((await checkCaa(resolver, "api.example.com", "lets_encrypt")).allowed).toBe(allowed);
  });

  it("judges against the configured CA", async () => {
    const resolver = craftedResolver({ "example.com": caaAt("example.com", '0 issue "pki.goog"') });
    expect((await checkCaa(resolver, "api.example.com", "google")).allowed).toBe(true);
    expect((await checkCaa(resolver, "api.example.com", "ssl_com")).allowed).toBe(false);
  });
});

describe("automatic attempts", () => {
  it("makes the first attempt within a minute of creation, through the queue, not in the caller's request", async () => {
    const seed = await seedProject(zones);
    const name = host("first");
    await setRecords(name, pointsHere);
    zones.domainQueue.length = 0;
    const created = await addDomain(zones, seed, name);
    // The answer is the pending domain: no DNS work happened inside the request.
    expect(created.body).toMatchObject({ status: "pending", last_checked_at: null });
    const sent = zones.domainQueue.splice(0);
    expect(sent).toEqual([
      {
        body: { v: 1, domain_id: expect.stringMatching(/^dom_/), claimed_at: zones.clock.now().getTime() },
        options: { delaySeconds: FIRST_ATTEMPT_DELAY_S },
      },
    ]);
    expect(FIRST_ATTEMPT_DELAY_S).toBeLessThan(60);

    // Queues delivers it FIRST_ATTEMPT_DELAY_S later to the domain-validations consumer.
    zones.clock.advance(FIRST_ATTEMPT_DELAY_S * 1000);
    const batch = createMessageBatch<unknown>(QUEUES.domainValidations, [
      { id: "first-1", timestamp: zones.clock.now(), attempts: 1, body: sent[0]!.body },
    ]);
    const ctx = createExecutionContext();
    await createWorker(testDeps({ now: zones.clock.now, resolver: zonesResolver })).queue(batch, env, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["first-1"]);
    const after = await read(zones, seed, name);
    expect(after).toMatchObject({ status: "validated", last_checked_at: "2026-11-21T12:00:15.000Z" });
    zones.clock.set("2026-11-21T12:00:00.000Z");
  });

  it("works from the tick's scheduled time: a late run still checks a domain that was due at its tick", async () => {
    const w = world();
    const seed = await seedProject(w.api);
    const name = `${uniqueLabel("late")}.example.test`;
    w.dns.set(name, "ok");
    await addDomain(w.api, seed, name);
    // The last tick of the window is 11:30 two days on; this run starts 40 minutes late, after the
    // window closed. Judged by the clock, nothing would be due any more.
    w.api.clock.set("2026-11-23T12:10:00.000Z");
    await w.cron({ scheduledTime: Date.parse("2026-11-23T11:30:00.000Z") });
    await w.drainQueue();
    expect(await read(w.api, seed, name)).toMatchObject({ status: "validated" });
  });

  it("/__scheduled without ?cron= (an empty expression) runs the configured cron instead of throwing", async () => {
    const w = world();
    const seed = await seedProject(w.api);
    const name = `${uniqueLabel("dev-cron")}.example.test`;
    w.dns.set(name, "ok");
    await addDomain(w.api, seed, name);
    w.api.clock.advance(HALF_HOUR);
    await w.cron({ cron: "" });
    await w.drainQueue();
    expect((await read(w.api, seed, name)).status).toBe("validated");
    await expect(w.cron({ cron: "*/7 * * * *" })).rejects.toThrow(/No handler for cron/);
  });
});
