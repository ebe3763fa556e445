import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { HALF_HOUR, read, world } from "../../test/cron-world";
import { addDomain, cloudflareCalls, fakeCloudflare, uniqueLabel, validate } from "../../test/domains";
import { seedProject } from "../../test/helpers";
import { TEST_CLOUDFLARE } from "../../test/secrets";
import { CertificateError, type CertificateProvider, CloudflareCustomHostnames } from "./certificates";

// The Cloudflare for SaaS client against test/global/fakes.mjs, which answers with the documented
// envelope {success, errors, messages, result} and moves ssl.status one step per read.
describe("Cloudflare for SaaS client", () => {
  it("creates a custom hostname with HTTP DV, reads it back until active, deletes it idempotently", async () => {
    const cf = fakeCloudflare();
    const hostname = `${uniqueLabel("cf")}.example.test`;
    const created = await cf.provision(hostname);
    expect(created).toMatchObject({ status: "pending", detail: "Cloudflare reports pending_validation" });
    expect(created.challenge).toEqual({
      path: `/.well-known/acme-challenge/${created.ref}-token`,
      body: `${created.ref}-token.body`,
    });
    expect((await cf.status(created.ref)).status).toBe("pending");
    expect((await cf.status(created.ref)).status).toBe("pending");
    expect(await cf.status(created.ref)).toEqual({ ref: created.ref, status: "active", challenge: null, detail: null });
    await cf.remove(created.ref);
    await cf.remove(created.ref);
    const calls = await cloudflareCalls();
    expect(calls.filter((c) => c.endsWith(created.ref))).toEqual([
      ...Array(3).fill(`GET /client/v4/zones/023e105f4ecef8ad9ca31a8372d0c353/custom_hostnames/${created.ref}`),
      ...Array(2).fill(`DELETE /client/v4/zones/023e105f4ecef8ad9ca31a8372d0c353/custom_hostnames/${created.ref}`),
    ]);
  });

  it("adopts the existing custom hostname when Cloudflare answers 'duplicate' (a retry after a lost answer)", async () => {
    const cf = fakeCloudflare();
    const hostname = `${uniqueLabel("dup")}.example.test`;
    const first = await cf.provision(hostname);
    const second = await cf.provision(hostname);
    expect(second.ref).toBe(first.ref);
  });

  it.each([
    ["an error envelope", "cf-refused", /refused the custom hostname: 1409 The hostname is on a blocklist/],
    ["a non-JSON 502", "cf-down", /HTTP 502 without its JSON envelope/],
  ])("turns %s into a CertificateError", async (_what, prefix, message) => {
    const error = await fakeCloudflare()
      .provision(`${prefix}.${uniqueLabel()}.example.test`)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CertificateError);
    expect((error as Error).message).toMatch(message);
  });

  it("reports a bad token and an unknown id as CertificateErrors", async () => {
    const badToken = new CloudflareCustomHostnames({
      apiToken: "wrong",
      zoneId: TEST_CLOUDFLARE.zoneId,
      baseUrl: `${env.TEST_FAKES_URL}/client/v4`,
    });
    await expect(badToken.provision("x.example.test")).rejects.toThrow(/10000 Authentication error/);
    await expect(fakeCloudflare().status("no-such-id")).rejects.toThrow(/1436 The custom hostname was not found/);
  });
});

describe("certificates of custom domains", () => {
  it("provisions on validation, serves the HTTP token on the domain, and the cron reads it back until active", async () => {
    const w = world({ certificates: () => fakeCloudflare() });
    const seed = await seedProject(w.api);
    const name = `${uniqueLabel("cert")}.example.test`;
    w.dns.set(name, "ok");
    await addDomain(w.api, seed, name);
    const validated = await validate(w.api, seed, name);
    expect(validated.body).toMatchObject({ status: "validated", certificate_status: "pending" });

    // Asking again adopts the existing custom hostname (Cloudflare answers "duplicate"): its id.
    const { ref } = await fakeCloudflare().provision(name);
    const token = await w.api.call(`/.well-known/acme-challenge/${ref}-token`, { host: name, token: null });
    expect(token.status).toBe(200);
    expect(await token.text()).toBe(`${ref}-token.body`);
    const other = await w.api.json(`/.well-known/acme-challenge/something-else`, { host: name, token: null });
    expect(other).toMatchObject({ status: 404, body: { code: "not_found" } });

    for (let i = 0; i < 3; i++) {
      w.api.clock.advance(HALF_HOUR);
      await w.cron();
    }
    expect((await read(w.api, seed, name)).certificate_status).toBe("active");
    // Once active, the token is no longer served.
    expect((await w.api.call(`/.well-known/acme-challenge/${ref}-token`, { host: name, token: null })).status).toBe(
      404,
    );

    // Removing the domain deletes its custom hostname at Cloudflare; the host is no longer served.
    expect(
      (await w.api.json(`/v2/projects/${seed.projectId}/domains/${name}`, { method: "DELETE", token: seed.token }))
        .status,
    ).toBe(200);
    expect((await cloudflareCalls()).at(-1)).toBe(
      `DELETE /client/v4/zones/${TEST_CLOUDFLARE.zoneId}/custom_hostnames/${ref}`,
    );
    expect((await w.api.json(`/v4/${seed.projectId}/hello/run`, { host: name, token: seed.token })).body.code).toBe(
      "unknown_host",
    );
  });

  it("keeps a domain validated when the provider refuses, retries from the cron, and again on a manual click", async () => {
    const w = world({ certificates: () => fakeCloudflare() });
    const seed = await seedProject(w.api);
    const name = `cf-refused.${uniqueLabel()}.example.test`;
    w.dns.set(name, "ok");
    await addDomain(w.api, seed, name);
    expect((await validate(w.api, seed, name)).body).toMatchObject({
      status: "validated",
      certificate_status: "pending",
    });
    const posts = async () => (await cloudflareCalls()).filter((c) => c.startsWith("POST")).length;
    const before = await posts();
    w.api.clock.advance(HALF_HOUR);
    await w.cron();
    expect(await posts()).toBe(before + 1);
    expect((await validate(w.api, seed, name)).body).toMatchObject({
      status: "validated",
      certificate_status: "pending",
    });
    expect(await posts()).toBe(before + 2);
  });

  it("removes the custom hostname with the domain; if the provider is down nothing is deleted and a retry finishes", async () => {
    let down = true;
    const removed: string[] = [];
    const flaky: CertificateProvider = {
      name: "flaky",
      provision: async (hostname) => ({ ref: `ref-${hostname}`, status: "active", challenge: null, detail: null }),
      status: async (ref) => ({ ref, status: "active", challenge: null, detail: null }),
      remove: async (ref) => {
        if (down) throw new CertificateError("the Cloudflare API could not be reached");
        removed.push(ref);
      },
    };
    const w = world({ certificates: () => flaky });
    const seed = await seedProject(w.api);
    const name = `${uniqueLabel("remove")}.example.test`;
    w.dns.set(name, "ok");
    await addDomain(w.api, seed, name);
    await validate(w.api, seed, name);
    const path = `/v2/projects/${seed.projectId}/domains/${name}`;
    const failed = await w.api.json(path, { method: "DELETE", token: seed.token });
    expect(failed).toMatchObject({ status: 503, body: { code: "service_unavailable" } });
    expect((await w.api.json(path, { token: seed.token })).status).toBe(200);
    down = false;
    expect((await w.api.json(path, { method: "DELETE", token: seed.token })).status).toBe(200);
    expect(removed).toEqual([`ref-${name}`]);
    expect((await w.api.json(path, { token: seed.token })).status).toBe(404);
  });
});
