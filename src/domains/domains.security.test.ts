import { env } from "cloudflare:workers";
import { and, eq } from "drizzle-orm";
import { createExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { HALF_HOUR, world } from "../../test/cron-world";
import { createDb } from "../db/client";
import { domains } from "../db/schema";
import { productionDeps } from "../deps";
import { getConfig } from "../platform/env";
import { createScope } from "../platform/scope";
import { createWorker } from "../worker";
import { validateDomain } from "./validate";

const DAY = 24 * 3600 * 1000;
import { addDomain, pointsHere, setRecords, txt, uniqueLabel, validate, ZONE, zonesResolver } from "../../test/domains";
import { ADMIN, client, seedProject, testDeps } from "../../test/helpers";
import { seedRunnable } from "../../test/runs";

const api = client();

describe("custom domains: security", () => {
  it("hides another project's domains: read, validate, delete and list all answer as if they did not exist", async () => {
    const owner = await seedProject(api);
    const intruder = await seedProject(api);
    const name = `${uniqueLabel("private")}.example.test`;
    await addDomain(api, owner, name);

    // The intruder's token on the owner's project: 404 for the project itself.
    for (const [method, path] of [
      ["GET", `/v2/projects/${owner.projectId}/domains`],
      ["GET", `/v2/projects/${owner.projectId}/domains/${name}`],
      ["POST", `/v2/projects/${owner.projectId}/domains/${name}/validate`],
      ["DELETE", `/v2/projects/${owner.projectId}/domains/${name}`],
    ] as const) {
      const { status, body } = await api.json(path, { method, token: intruder.token });
      expect(status).toBe(404);
      expect(body.code).toBe("not_found");
    }
    // The owner's domain named under the intruder's own project: no such domain there.
    for (const [method, path] of [
      ["GET", `/v2/projects/${intruder.projectId}/domains/${name}`],
      ["POST", `/v2/projects/${intruder.projectId}/domains/${name}/validate`],
      ["DELETE", `/v2/projects/${intruder.projectId}/domains/${name}`],
    ] as const) {
      expect((await api.json(path, { method, token: intruder.token })).status).toBe(404);
    }
    const list = await api.json<{ data: unknown[] }>(`/v2/projects/${intruder.projectId}/domains`, {
      token: intruder.token,
    });
    expect(list.body.data).toEqual([]);
    expect((await api.json(`/v2/projects/${owner.projectId}/domains/${name}`, { token: owner.token })).status).toBe(
      200,
    );
  });

  it.each([
    ["no token", null, 401, "unauthorized"],
    ["a malformed token", "not-a-token", 401, "invalid_token"],
    ["a well-formed unknown token", "egsa_0000000000000000000000000000000000000000", 401, "invalid_token"],
  ])("refuses %s", async (_what, token, status, code) => {
    const owner = await seedProject(api);
    const {
      status: got,
      body,
      headers,
    } = await api.json(`/v2/projects/${owner.projectId}/domains`, {
      method: "POST",
      token,
      body: { domain: `${uniqueLabel()}.example.test`, region: "us-east-1" },
    });
    expect(got).toBe(status);
    expect(body.code).toBe(code);
    expect(headers.get("www-authenticate")).toMatch(/^Bearer/);
  });

  it("rejects unknown fields, wrong types, and oversized names without echoing them whole", async () => {
    const seed = await seedProject(api);
    const path = `/v2/projects/${seed.projectId}/domains`;
    const extra = await api.json(path, {
      method: "POST",
      token: seed.token,
      body: { domain: "x.example.test", region: "us-east-1", project_id: "proj_other" },
    });
    expect(extra).toMatchObject({ status: 400, body: { code: "validation_failed" } });
    const typed = await api.json(path, {
      method: "POST",
      token: seed.token,
      body: { domain: ["x.example.test"], region: "us-east-1" },
    });
    expect(typed).toMatchObject({ status: 400, body: { code: "validation_failed" } });
    const huge = await api.json(path, {
      method: "POST",
      token: seed.token,
      body: { domain: "a".repeat(5000), region: "us-east-1" },
    });
    expect(huge.status).toBe(400);
    expect(JSON.stringify(huge.body).length).toBeLessThan(2000);
  });

  it("answers a path domain that cannot be a hostname with 404, not an error", async () => {
    const seed = await seedProject(api);
    for (const name of ["%2F%2Fevil", "a%20b.example.test", "a..b", "x".repeat(900)]) {
      const { status, body } = await api.json(`/v2/projects/${seed.projectId}/domains/${name}`, { token: seed.token });
      expect(status).toBe(404);
      expect(body.code).toBe("not_found");
    }
  });

  it("will not let a project claim the service's own hostnames, which would take over its traffic", async () => {
    const seed = await seedProject(api);
    for (const name of ["api.service.test", "proxy.aws.us-east-1.service.test", "localhost", "127.0.0.1"]) {
      expect((await addDomain(api, seed, name)).status).toBe(400);
    }
  });
});

// Takeover attempts, end to end against a real DNS server (knot behind dnsdist) whose zone the test
// writes (test/global/dns-zones.mjs), through the service's own DoH client.
describe("custom domains: nobody can take over a hostname (DESIGN.md, ownership)", () => {
  const zones = client({ resolver: zonesResolver });
  const host = () => `${uniqueLabel("own")}.${ZONE}`;
  type DomainBody = {
    status: string;
    ownership_required: boolean;
    ownership_record: { name: string; value: string };
    last_error: { code: string; message: string } | null;
  };
  const read = async (seed: { projectId: string; token: string }, name: string) =>
    (await zones.json<DomainBody>(`/v2/projects/${seed.projectId}/domains/${name}`, { token: seed.token })).body;

  it("a squatter's pending claim neither blocks the owner nor wins when the owner's CNAME appears after the owner added the domain", async () => {
    const squatter = await seedProject(zones);
    const owner = await seedProject(zones);
    const name = host();
    expect((await addDomain(zones, squatter, name)).body).toMatchObject({
      status: "pending",
      ownership_required: false,
    });
    const claim = await addDomain(zones, owner, name);
    expect(claim.status).toBe(201);
    expect(claim.body).toMatchObject({ status: "pending", ownership_required: true });
    expect((await read(squatter, name)).ownership_required).toBe(true);

    await setRecords(name, pointsHere);
    const attempt = await validate(zones, squatter, name);
    expect(attempt.body).toMatchObject({ status: "pending", last_error: { code: "OWNERSHIP_PROOF_REQUIRED" } });
    const squatterRecord = (await read(squatter, name)).ownership_record;
    expect(attempt.body.last_error!.message).toContain(
      `TXT record _gateway-challenge.${name} with the value ${squatterRecord.value}`,
    );
    // Nothing in it names the other project.
    expect(attempt.body.last_error!.message).not.toContain(owner.projectId);
    expect((await zones.json("/v4/x/y/run", { host: name })).body).toMatchObject({ status: 404, code: "unknown_host" });
    // The owner, too, needs the proof now; a failed check never fails a claim that only waits for it.
    expect((await validate(zones, owner, name)).body).toMatchObject({
      status: "pending",
      last_error: { code: "OWNERSHIP_PROOF_REQUIRED" },
    });
  });

  it("the owner validates with its TXT record; every other claim becomes failed with OWNERSHIP_MOVED", async () => {
    const squatter = await seedProject(zones);
    const owner = await seedProject(zones);
    const name = host();
    await addDomain(zones, squatter, name);
    const ownerRecord = (await addDomain(zones, owner, name)).body as unknown as DomainBody;
    expect(ownerRecord.ownership_record).toEqual({
      type: "TXT",
      name: `_gateway-challenge.${name}`,
      value: expect.stringMatching(/^gw-[0-9a-f]{32}$/),
    });
    const squatterRecord = (await read(squatter, name)).ownership_record;
    expect(squatterRecord.value).not.toBe(ownerRecord.ownership_record.value);

    await setRecords(name, pointsHere);
    await setRecords(`_gateway-challenge.${name}`, txt(ownerRecord.ownership_record.value));
    // The owner's proof is no proof for the squatter's claim.
    expect((await validate(zones, squatter, name)).body.last_error?.code).toBe("OWNERSHIP_PROOF_REQUIRED");
    expect((await validate(zones, owner, name)).body).toMatchObject({ status: "validated", last_error: null });
    const moved = await read(squatter, name);
    expect(moved).toMatchObject({ status: "failed", last_error: { code: "OWNERSHIP_MOVED" } });
    expect(moved.last_error!.message).not.toContain(owner.projectId);
    // Validating again changes nothing for the squatter: it still has no proof of its own.
    expect((await validate(zones, squatter, name)).body).toMatchObject({
      status: "failed",
      last_error: { code: "OWNERSHIP_PROOF_REQUIRED" },
    });
  });

  it("a validated squatter stops serving the moment the owner proves ownership, warm host cache included", async () => {
    const squatter = await seedRunnable(zones);
    const owner = await seedProject(zones);
    const name = host();
    await setRecords(name, pointsHere); // a CNAME the owner left pointing here
    await addDomain(zones, squatter, name);
    expect((await validate(zones, squatter, name)).body.status).toBe("validated");
    const run = () => zones.json(squatter.runPath, { host: name, token: squatter.token });
    expect((await run()).status).toBe(200); // and the route is now in this isolate's host cache

    const ownerRecord = (await addDomain(zones, owner, name)).body as unknown as DomainBody;
    await setRecords(`_gateway-challenge.${name}`, txt(ownerRecord.ownership_record.value));
    expect((await validate(zones, owner, name)).body.status).toBe("validated");
    expect(await read(squatter, name)).toMatchObject({ status: "failed", last_error: { code: "OWNERSHIP_MOVED" } });
    expect((await run()).body).toMatchObject({ status: 404, code: "not_found" });
  });

  it("a squatter who claimed in advance wins the race when the owner publishes the CNAME before adding the domain, and loses it at once when the owner adds the domain with its TXT record", async () => {
    // The race the CNAME-only flow leaves open (SECURITY.md, domain takeover): an uncontested hostname
    // validates by its CNAME alone, so a claim made before the owner's CNAME exists validates when it appears.
    const squatter = await seedRunnable(zones);
    const owner = await seedRunnable(zones);
    const name = host();
    expect((await addDomain(zones, squatter, name)).body).toMatchObject({
      status: "pending",
      ownership_required: false,
    });
    await setRecords(name, pointsHere); // the owner's CNAME, published before the owner added the domain
    expect((await validate(zones, squatter, name)).body.status).toBe("validated");
    expect((await zones.json(squatter.runPath, { host: name, token: squatter.token })).status).toBe(200);

    // The owner's recovery: add the domain (contested now: it must prove ownership), publish its TXT, validate.
    const claim = (await addDomain(zones, owner, name)).body as unknown as DomainBody;
    expect(claim).toMatchObject({ status: "pending", ownership_required: true });
    expect((await validate(zones, owner, name)).body).toMatchObject({
      status: "pending",
      last_error: { code: "OWNERSHIP_PROOF_REQUIRED" },
    });
    await setRecords(`_gateway-challenge.${name}`, txt(claim.ownership_record.value));
    expect((await validate(zones, owner, name)).body).toMatchObject({ status: "validated", last_error: null });

    // At once: the squatter's claim failed with OWNERSHIP_MOVED, its app no longer answers on the hostname, the owner's does.
    expect(await read(squatter, name)).toMatchObject({ status: "failed", last_error: { code: "OWNERSHIP_MOVED" } });
    expect((await zones.json(squatter.runPath, { host: name, token: squatter.token })).body).toMatchObject({
      status: 404,
    });
    expect((await zones.json(owner.runPath, { host: name, token: owner.token })).status).toBe(200);
    // The squatter cannot take it back: validating again, or removing and claiming anew, needs its own TXT record.
    expect((await validate(zones, squatter, name)).body).toMatchObject({
      status: "failed",
      last_error: { code: "OWNERSHIP_PROOF_REQUIRED" },
    });
    expect(
      (
        await zones.json(`/v2/projects/${squatter.projectId}/domains/${name}`, {
          method: "DELETE",
          token: squatter.token,
        })
      ).status,
    ).toBe(200);
    expect((await addDomain(zones, squatter, name)).body).toMatchObject({
      status: "pending",
      ownership_required: true,
    });
    expect((await validate(zones, squatter, name)).body).toMatchObject({
      status: "pending",
      last_error: { code: "OWNERSHIP_PROOF_REQUIRED" },
    });
    expect((await zones.json(owner.runPath, { host: name, token: owner.token })).status).toBe(200);
  });

  it("a removed domain's hostname, claimed by another project within 30 days, needs the TXT record (dangling CNAME)", async () => {
    const previous = await seedProject(zones);
    const next = await seedProject(zones);
    const name = host();
    await setRecords(name, pointsHere);
    await addDomain(zones, previous, name);
    expect((await validate(zones, previous, name)).body.status).toBe("validated");
    expect(
      (
        await zones.json(`/v2/projects/${previous.projectId}/domains/${name}`, {
          method: "DELETE",
          token: previous.token,
        })
      ).status,
    ).toBe(200);

    expect((await addDomain(zones, next, name)).body.ownership_required).toBe(true);
    expect((await validate(zones, next, name)).body).toMatchObject({
      status: "pending",
      last_error: { code: "OWNERSHIP_PROOF_REQUIRED" },
    });
    // 30 days on, the hostname is no longer contested: the CNAME alone validates (the seed's token has
    // expired by then, so the operator asks).
    zones.clock.advance(30 * 24 * 3600 * 1000 + 60_000);
    const operator = { projectId: next.projectId, token: ADMIN };
    expect((await read(operator, name)).ownership_required).toBe(false);
    expect((await validate(zones, operator, name)).body).toMatchObject({ status: "validated", last_error: null });
    zones.clock.set("2026-11-21T12:00:00.000Z");
  });

  it("caps the claims of one project (MAX_DOMAINS_PER_PROJECT), whatever their state, with a 409 that says so", async () => {
    const capped = client({}, { MAX_DOMAINS_PER_PROJECT: "2" } as never);
    const seed = await seedProject(capped);
    for (let i = 0; i < 2; i++) expect((await addDomain(capped, seed, host())).status).toBe(201);
    const third = await addDomain(capped, seed, host());
    expect(third.status).toBe(409);
    expect(third.body).toMatchObject({ code: "conflict", limit: 2 });
    expect(third.body.detail).toContain("MAX_DOMAINS_PER_PROJECT");
    expect(
      (await capped.json<{ data: unknown[] }>(`/v2/projects/${seed.projectId}/domains`, { token: seed.token })).body
        .data,
    ).toHaveLength(2);
  });

  it("removes claims never validated 30 days after their window ends, keeping validated ones (fake clock)", async () => {
    const w = world();
    const seed = await seedProject(w.api);
    const stale = `${uniqueLabel("stale")}.example.test`;
    const held = `${uniqueLabel("held")}.example.test`;
    w.dns.set(held, "ok");
    await addDomain(w.api, seed, stale);
    await addDomain(w.api, seed, held);
    expect((await validate(w.api, seed, held)).body.status).toBe("validated");
    const operator = { projectId: seed.projectId, token: ADMIN };
    const path = (name: string) => `/v2/projects/${seed.projectId}/domains/${name}`;

    // Window ends 2 days after creation; the claim stays for 30 days beyond.
    w.api.clock.set(new Date(Date.parse("2026-11-21T12:00:00.000Z") + 32 * DAY - HALF_HOUR).toISOString());
    await w.cron();
    expect((await w.api.json(path(stale), { token: operator.token })).status).toBe(200);
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    expect((await w.api.json(path(stale), { token: operator.token })).status).toBe(404);
    expect((await w.api.json(path(held), { token: operator.token })).body).toMatchObject({ status: "validated" });
  });

  it("refuses to start without Cloudflare for SaaS unless CERTIFICATE_PROVIDER is local, naming the settings", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const production = { ...env, CERTIFICATE_PROVIDER: undefined, CF_API_TOKEN: undefined, CF_ZONE_ID: undefined };
    expect(() => getConfig(production)).toThrow(
      /CERTIFICATE_PROVIDER is "cloudflare" \(the default\), which needs CF_API_TOKEN and CF_ZONE_ID/,
    );
    const response = await createWorker(productionDeps).fetch(
      new Request("http://localhost/v2/projects"),
      production,
      createExecutionContext(),
    );
    expect(response.status).toBe(500);
    expect((await response.json<{ code: string }>()).code).toBe("configuration_error");
    log.mockRestore();
    expect(getConfig({ ...production, CF_API_TOKEN: "token", CF_ZONE_ID: "zone" }).certificateProvider).toBe(
      "cloudflare",
    );
    expect(
      productionDeps.certificates(getConfig({ ...production, CF_API_TOKEN: "token", CF_ZONE_ID: "zone" })).name,
    ).toBe("cloudflare");
    expect(productionDeps.certificates(getConfig({ ...production, CERTIFICATE_PROVIDER: "local" })).name).toBe("local");
  });

  it("lets the database itself refuse a second validated holder of one hostname", async () => {
    const first = await seedProject(zones);
    const second = await seedProject(zones);
    const name = host();
    await addDomain(zones, first, name);
    await addDomain(zones, second, name);
    const db = createDb(env.DB);
    await db
      .update(domains)
      .set({ status: "validated" })
      .where(and(eq(domains.hostname, name), eq(domains.projectId, first.projectId)));
    await expect(
      db
        .update(domains)
        .set({ status: "validated" })
        .where(and(eq(domains.hostname, name), eq(domains.projectId, second.projectId))),
    ).rejects.toSatisfy((error: Error) => /UNIQUE constraint failed/.test(String(error.cause ?? error)));
  });

  it("never lets a check decided before another claim's move undo that move", async () => {
    const first = await seedProject(zones);
    const second = await seedProject(zones);
    const name = host();
    await setRecords(name, { type: "CNAME", data: "elsewhere.test." });
    await addDomain(zones, first, name);
    expect((await validate(zones, first, name)).body.status).toBe("failed");
    const db = createDb(env.DB);
    const [asReadBefore] = await db
      .select()
      .from(domains)
      .where(and(eq(domains.hostname, name), eq(domains.projectId, first.projectId)));

    const secondRecord = (await addDomain(zones, second, name)).body as unknown as DomainBody;
    await setRecords(name, pointsHere);
    await setRecords(
      `_gateway-challenge.${name}`,
      txt(secondRecord.ownership_record.value),
      txt(asReadBefore!.ownershipValue),
    );
    expect((await validate(zones, second, name)).body.status).toBe("validated");
    // The first claim's check, read before the move (still failed, so the status alone would match).
    const late = await validateDomain(
      createScope(env, createExecutionContext(), testDeps({ now: zones.clock.now, resolver: zonesResolver })),
      asReadBefore!,
    );
    expect(late).toMatchObject({ status: "failed", lastErrorCode: "OWNERSHIP_MOVED" });
    expect(await read(second, name)).toMatchObject({ status: "validated" });
  });
});
