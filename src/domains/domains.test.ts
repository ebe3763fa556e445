import { describe, expect, it } from "vitest";
import { addDomain, TARGET, uniqueLabel, validate } from "../../test/domains";
import { client, seedProject } from "../../test/helpers";

// Validation here resolves against the real DNS server of test/global/dns-harness.mjs (knot behind
// dnsdist, zones in scripts/dns-harness/start.sh), through the service's own DoH client.
const api = client();

describe("custom domains API", () => {
  it("creates a pending domain with the CNAME to create and the automatic window", async () => {
    const seed = await seedProject(api);
    const name = `${uniqueLabel("new")}.example.test`;
    const { status, body } = await addDomain(api, seed, name);
    expect(status).toBe(201);
    expect(body).toEqual({
      domain: name,
      project_id: seed.projectId,
      region: "us-east-1",
      status: "pending",
      dns_record: { type: "CNAME", name, value: TARGET },
      ownership_record: {
        type: "TXT",
        name: `_gateway-challenge.${name}`,
        value: expect.stringMatching(/^gw-[0-9a-f]{32}$/),
      },
      ownership_required: false,
      last_error: null,
      last_checked_at: null,
      next_check_at: "2026-11-21T12:30:00.000Z",
      auto_validation_ends_at: "2026-11-23T12:00:00.000Z",
      validated_at: null,
      certificate_status: "none",
      created_at: "2026-11-21T12:00:00.000Z",
    });
  });

  it("advises an ALIAS record for an apex, with the region's target", async () => {
    const seed = await seedProject(api);
    const { body } = await addDomain(api, seed, "Example.Test.", "eu-west-2");
    expect(body.domain).toBe("example.test");
    expect(body.dns_record).toEqual({ type: "ALIAS", name: "example.test", value: "proxy.aws.eu-west-2.service.test" });
  });

  it("stores IDNs as punycode and finds them by either form", async () => {
    const seed = await seedProject(api);
    const created = await addDomain(api, seed, "bücher.example.test");
    expect(created.body.domain).toBe("xn--bcher-kva.example.test");
    for (const form of ["BÜCHER.example.test.", "xn--bcher-kva.example.test"]) {
      const read = await api.json(`/v2/projects/${seed.projectId}/domains/${encodeURIComponent(form)}`, {
        token: seed.token,
      });
      expect(read.status).toBe(200);
      expect(read.body.domain).toBe("xn--bcher-kva.example.test");
    }
  });

  it("lists, reads and deletes; a deleted domain is gone", async () => {
    const seed = await seedProject(api);
    const names = [
      `b-${uniqueLabel()}.example.test`,
      `a-${uniqueLabel()}.example.test`,
      `c-${uniqueLabel()}.example.test`,
    ];
    for (const name of names) expect((await addDomain(api, seed, name)).status).toBe(201);
    const first = await api.json<{ data: { domain: string }[]; next_cursor: string | null }>(
      `/v2/projects/${seed.projectId}/domains?limit=2`,
      { token: seed.token },
    );
    expect(first.body.data.map((d) => d.domain)).toEqual([...names].sort().slice(0, 2));
    const second = await api.json<{ data: { domain: string }[]; next_cursor: string | null }>(
      `/v2/projects/${seed.projectId}/domains?limit=2&cursor=${first.body.next_cursor}`,
      { token: seed.token },
    );
    expect(second.body.data.map((d) => d.domain)).toEqual([[...names].sort()[2]]);
    expect(second.body.next_cursor).toBeNull();

    const path = `/v2/projects/${seed.projectId}/domains/${names[0]}`;
    expect((await api.json(path, { token: seed.token })).body.domain).toBe(names[0]);
    const removed = await api.json(path, { method: "DELETE", token: seed.token });
    expect(removed.status).toBe(200);
    expect(removed.body.domain).toBe(names[0]);
    expect((await api.json(path, { token: seed.token })).status).toBe(404);
    expect((await api.json(path, { method: "DELETE", token: seed.token })).status).toBe(404);
    // Once removed, another project may claim the hostname.
    expect((await addDomain(api, await seedProject(api), names[0]!)).status).toBe(201);
  });

  it("allows several domains per project, and answers 409 only when this project already has the hostname", async () => {
    const seed = await seedProject(api);
    const other = await seedProject(api);
    const name = `${uniqueLabel("taken")}.example.test`;
    expect((await addDomain(api, seed, name)).status).toBe(201);
    expect((await addDomain(api, seed, `${uniqueLabel("second")}.example.test`)).status).toBe(201);
    const again = await addDomain(api, seed, name.toUpperCase());
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ code: "conflict", detail: `${name} is already a domain of this project.` });
    // Another project's claim does not block (docs/domains.md, Ownership): both are now contested.
    const elsewhere = await addDomain(api, other, `${name}.`);
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body).toMatchObject({ status: "pending", ownership_required: true });
  });

  it("requires a region, one of REGIONS", async () => {
    const seed = await seedProject(api);
    const missing = await api.json(`/v2/projects/${seed.projectId}/domains`, {
      method: "POST",
      token: seed.token,
      body: { domain: "x.example.test" },
    });
    expect(missing.status).toBe(400);
    expect(missing.body.errors).toEqual([expect.objectContaining({ field: "region" })]);
    const unknown = await addDomain(api, seed, "y.example.test", "mars-north-1");
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors).toEqual([
      { location: "body", field: "region", message: "must be one of us-east-1, eu-west-2" },
    ]);
  });

  it.each([
    ["203.0.113.7", "is an IP address"],
    ["*.example.test", "wildcards are not supported"],
    ["a..example.test", "empty label"],
    [`${"x".repeat(64)}.example.test`, "at most 63"],
    [`${"abcdefghi.".repeat(26)}test`, "at most 253"],
    ["test", "single label"],
    ["co.uk", "public suffix"],
    ["service.test", "belongs to this service"],
    ["api.service.test", "belongs to this service"],
  ])("refuses %s with 400 and the reason", async (domain, reason) => {
    const seed = await seedProject(api);
    const { status, body } = await addDomain(api, seed, domain);
    expect(status).toBe(400);
    expect(body.code).toBe("validation_failed");
    expect(body.detail).toContain(reason);
    expect((body.errors as { field: string; message: string }[])[0]).toMatchObject({ field: "domain" });
  });
});

describe("validation against a real DNS server (manual validation)", () => {
  it("validates a subdomain whose CNAME points to the target, and provisions its certificate", async () => {
    const seed = await seedProject(api);
    await addDomain(api, seed, "good.example.test");
    const { status, body } = await validate(api, seed, "good.example.test");
    expect(status).toBe(200);
    expect(body).toMatchObject({
      status: "validated",
      last_error: null,
      validated_at: "2026-11-21T12:00:00.000Z",
      last_checked_at: "2026-11-21T12:00:00.000Z",
      next_check_at: null,
      certificate_status: "active",
    });
  });

  it("accepts the validate action as browsers and curl send it: POST with an empty body and no Content-Type", async () => {
    const seed = await seedProject(api);
    await addDomain(api, seed, "x-empty.wild.example.test");
    const response = await api.call(`/v2/projects/${seed.projectId}/domains/x-empty.wild.example.test/validate`, {
      method: "POST",
      token: seed.token,
      rawBody: new Uint8Array(0),
    });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { status: string }).status).toBe("validated");
  });

  it("fails a wrong target with WRONG_TARGET", async () => {
    const seed = await seedProject(api);
    await addDomain(api, seed, "wrong.example.test");
    const { body } = await validate(api, seed, "wrong.example.test");
    expect(body.status).toBe("failed");
    expect(body.last_error).toEqual({
      code: "WRONG_TARGET",
      message: `wrong.example.test has a CNAME to elsewhere.test, but it must point to ${TARGET}. Change the record's value to ${TARGET}. DNS caches may keep the old answer for up to 60 s after you change it.`,
    });
    expect(body.next_check_at).toBeNull();
  });

  it.each([
    ["a-instead.example.test", "A 203.0.113.50, A 203.0.113.51, AAAA 2001:db8:bad::50 where the CNAME should be"],
    ["multi-cname.example.test", "2 CNAME records"],
    ["conflict.example.test", "also A 203.0.113.50"],
  ])("fails conflicting records at %s with CONFLICTING_RECORDS", async (name, seen) => {
    const seed = await seedProject(api);
    await addDomain(api, seed, name);
    const { body } = await validate(api, seed, name);
    expect(body.status).toBe("failed");
    expect(body.last_error?.code).toBe("CONFLICTING_RECORDS");
    expect(body.last_error?.message).toContain(seen);
  });

  it("validates an apex whose flattened A/AAAA set equals the target's (ALIAS)", async () => {
    const seed = await seedProject(api);
    await addDomain(api, seed, "apex.test");
    const { body } = await validate(api, seed, "apex.test");
    expect(body).toMatchObject({ status: "validated", last_error: null });
  });

  it("fails an apex with someone else's address with WRONG_TARGET", async () => {
    const seed = await seedProject(api);
    await addDomain(api, seed, "elsewhere.test");
    const { body } = await validate(api, seed, "elsewhere.test");
    expect(body.status).toBe("failed");
    expect(body.last_error?.code).toBe("WRONG_TARGET");
  });

  it("validates a CNAME chain and a wildcard-synthesised CNAME", async () => {
    const seed = await seedProject(api);
    const wild = `${uniqueLabel()}.wild.example.test`;
    for (const name of ["chain.example.test", wild]) {
      await addDomain(api, seed, name);
      expect((await validate(api, seed, name)).body.status).toBe("validated");
    }
  });

  it("leaves a missing record pending with NO_RECORD, and keeps the automatic attempts", async () => {
    const seed = await seedProject(api);
    const name = `${uniqueLabel("missing")}.example.test`;
    await addDomain(api, seed, name);
    const { body } = await validate(api, seed, name);
    expect(body.status).toBe("pending");
    expect(body.last_error?.code).toBe("NO_RECORD");
    expect(body.last_error?.message).toContain(`Create CNAME ${name} → ${TARGET}`);
    expect(body.next_check_at).toBe("2026-11-21T12:30:00.000Z");
  });

  it("leaves NODATA pending too", async () => {
    const seed = await seedProject(api);
    await addDomain(api, seed, "txt-only.example.test");
    const { body } = await validate(api, seed, "txt-only.example.test");
    expect(body).toMatchObject({ status: "pending", last_error: { code: "NO_RECORD" } });
    expect(body.last_error?.message).toContain("(NODATA)");
  });

  it("names the region when the record points at another region's target", async () => {
    const seed = await seedProject(api);
    // Created for eu-west-2 while DNS points at us-east-1: failed, and the message names the region.
    await addDomain(api, seed, `${uniqueLabel()}.wild.example.test`, "eu-west-2").then(async ({ body }) => {
      const failed = await validate(api, seed, body.domain as string);
      expect(failed.body.status).toBe("failed");
      expect(failed.body.last_error?.message).toContain(
        "target of region us-east-1, but this domain was created for region eu-west-2",
      );
    });
  });
});
