import { describe, expect, it } from "vitest";
import { HALF_HOUR, read, world } from "../../test/cron-world";
import { addDomain, uniqueLabel, validate } from "../../test/domains";
import { seedProject } from "../../test/helpers";
import { productionDeps } from "../deps";
import { INLINE_CHECKS_PER_CRON } from "./cron";

describe("automatic validation (cron */30 and the domain-validations queue)", () => {
  it("checks many pending domains: a few inline, the rest fanned out through the queue, each once", async () => {
    const w = world();
    const seed = await seedProject(w.api);
    const names = Array.from({ length: 11 }, (_, i) => `${uniqueLabel(`many${i}`)}.example.test`);
    for (const [i, name] of names.entries()) {
      w.dns.set(name, i % 3 === 0 ? "wrong" : "ok");
      expect((await addDomain(w.api, seed, name)).status).toBe(201);
    }
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    const inline = names.filter((n) => w.checksOf(n) === 1);
    expect(inline.length).toBeLessThanOrEqual(INLINE_CHECKS_PER_CRON);
    expect(w.sent.map((m) => m.domain_id)).toHaveLength(new Set(w.sent.map((m) => m.domain_id)).size);
    const results = await w.drainQueue();
    expect(results.every((r) => r.retryMessages.length === 0)).toBe(true);
    for (const [i, name] of names.entries()) {
      expect(w.checksOf(name)).toBe(1);
      const domain = await read(w.api, seed, name);
      expect(domain.status).toBe(i % 3 === 0 ? "failed" : "validated");
      expect(domain.last_checked_at).toBe(w.api.clock.now().toISOString());
    }
  });

  it("is idempotent when two runs overlap: each due domain is claimed by exactly one", async () => {
    const w = world();
    const seed = await seedProject(w.api);
    const names = Array.from({ length: 6 }, () => `${uniqueLabel("overlap")}.example.test`);
    for (const name of names) await addDomain(w.api, seed, name);
    w.api.clock.advance(HALF_HOUR);
    await Promise.all([w.cron(), w.cron()]);
    await w.drainQueue();
    for (const name of names) expect(w.checksOf(name)).toBe(1);
  });

  it("checks domains whose messages were queued before messages carried a version (a deploy between send and delivery)", async () => {
    const w = world();
    const seed = await seedProject(w.api);
    const names = Array.from(
      { length: INLINE_CHECKS_PER_CRON + 3 },
      (_, i) => `${uniqueLabel(`old${i}`)}.example.test`,
    );
    for (const name of names) {
      w.dns.set(name, "ok");
      await addDomain(w.api, seed, name);
    }
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    expect(w.sent.length).toBeGreaterThan(0);
    // As the code before versions sent them: no `v`.
    const unversioned = w.sent.splice(0).map(({ v, ...body }) => (void v, body));
    w.sent.push(...(unversioned as typeof w.sent));
    const results = await w.drainQueue();
    expect(results.flatMap((r) => r.retryMessages)).toEqual([]);
    expect(results.flatMap((r) => r.explicitAcks)).toHaveLength(unversioned.length);
    for (const name of names) {
      expect(w.checksOf(name)).toBe(1);
      expect((await read(w.api, seed, name)).status).toBe("validated");
    }
  });

  it("skips a redelivered message for a domain already checked since the claim", async () => {
    const w = world();
    const seed = await seedProject(w.api);
    for (let i = 0; i <= INLINE_CHECKS_PER_CRON; i++)
      await addDomain(w.api, seed, `${uniqueLabel("redelivered")}.example.test`);
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    const message = w.sent[0];
    expect(message).toMatchObject({
      v: 1,
      domain_id: expect.stringMatching(/^dom_/),
      claimed_at: w.api.clock.now().getTime(),
    });
    await w.drainQueue();
    const before = w.queries.length;
    w.sent.push(message!);
    const [result] = await w.drainQueue();
    expect(w.queries.length).toBe(before);
    expect(result!.explicitAcks).toHaveLength(1);
  });

  it("does not retry failed domains automatically; manual validation moves failed to validated once DNS is fixed", async () => {
    const w = world();
    const seed = await seedProject(w.api);
    const name = `${uniqueLabel("fixed")}.example.test`;
    w.dns.set(name, "wrong");
    await addDomain(w.api, seed, name);
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    await w.drainQueue();
    expect((await read(w.api, seed, name)).status).toBe("failed");
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    await w.drainQueue();
    expect(w.checksOf(name)).toBe(1);

    w.dns.set(name, "ok");
    const manual = await validate(w.api, seed, name);
    expect(manual.body).toMatchObject({ status: "validated", last_error: null, certificate_status: "active" });
    // A validated domain is not checked again, by the cron or by another click.
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    await validate(w.api, seed, name);
    expect(w.checksOf(name)).toBe(2);
  });

  it("keeps the state when the resolver fails, recording DNS_UNAVAILABLE as the last error", async () => {
    const w = world();
    const seed = await seedProject(w.api);
    const pending = `${uniqueLabel("down")}.example.test`;
    const failed = `${uniqueLabel("down-failed")}.example.test`;
    await addDomain(w.api, seed, pending);
    w.dns.set(failed, "wrong");
    await addDomain(w.api, seed, failed);
    expect((await validate(w.api, seed, failed)).body.status).toBe("failed");

    w.dns.set(pending, "down");
    w.dns.set(failed, "down");
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    await w.drainQueue();
    expect(await read(w.api, seed, pending)).toMatchObject({
      status: "pending",
      last_error: { code: "DNS_UNAVAILABLE" },
      next_check_at: "2026-11-21T13:00:00.000Z",
    });
    const manual = await validate(w.api, seed, failed);
    expect(manual.body).toMatchObject({ status: "failed", last_error: { code: "DNS_UNAVAILABLE" } });
  });

  it("runs over many pending domains against the real DNS server, each ending as its DNS says", async () => {
    // The service's own DoH client against knot/dnsdist (test/global/dns-harness.mjs).
    const w = world({ resolver: productionDeps.resolver });
    const seed = await seedProject(w.api);
    const expected = new Map<string, [string, string | null]>([
      ["wrong.example.test", ["failed", "WRONG_TARGET"]],
      ["multi-cname.example.test", ["failed", "CONFLICTING_RECORDS"]],
      ["apex.test", ["validated", null]],
      ["chain.example.test", ["validated", null]],
    ]);
    for (let i = 0; i < 14; i++) expected.set(`${uniqueLabel(`bulk${i}`)}.wild.example.test`, ["validated", null]);
    for (let i = 0; i < 3; i++) expected.set(`${uniqueLabel(`absent${i}`)}.example.test`, ["pending", "NO_RECORD"]);
    for (const name of expected.keys()) expect((await addDomain(w.api, seed, name)).status).toBe(201);
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    expect(w.sent.length).toBeGreaterThanOrEqual(expected.size - INLINE_CHECKS_PER_CRON);
    await w.drainQueue();
    for (const [name, [status, code]] of expected) {
      const domain = await read(w.api, seed, name);
      expect({ name, status: domain.status, code: domain.last_error?.code ?? null }).toEqual({ name, status, code });
    }
  });
});
