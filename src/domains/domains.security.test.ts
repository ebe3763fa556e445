import { describe, expect, it } from "vitest";
import { addDomain, uniqueLabel } from "../../test/domains";
import { client, seedProject } from "../../test/helpers";

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
    const list = await api.json<{ data: unknown[] }>(`/v2/projects/${intruder.projectId}/domains`, { token: intruder.token });
    expect(list.body.data).toEqual([]);
    expect((await api.json(`/v2/projects/${owner.projectId}/domains/${name}`, { token: owner.token })).status).toBe(200);
  });

  it.each([
    ["no token", null, 401, "unauthorized"],
    ["a malformed token", "not-a-token", 401, "invalid_token"],
    ["a well-formed unknown token", "egsa_0000000000000000000000000000000000000000", 401, "invalid_token"],
  ])("refuses %s", async (_what, token, status, code) => {
    const owner = await seedProject(api);
    const { status: got, body, headers } = await api.json(`/v2/projects/${owner.projectId}/domains`, {
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
    const extra = await api.json(path, { method: "POST", token: seed.token, body: { domain: "x.example.test", region: "us-east-1", project_id: "proj_other" } });
    expect(extra).toMatchObject({ status: 400, body: { code: "validation_failed" } });
    const typed = await api.json(path, { method: "POST", token: seed.token, body: { domain: ["x.example.test"], region: "us-east-1" } });
    expect(typed).toMatchObject({ status: 400, body: { code: "validation_failed" } });
    const huge = await api.json(path, { method: "POST", token: seed.token, body: { domain: "a".repeat(5000), region: "us-east-1" } });
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
