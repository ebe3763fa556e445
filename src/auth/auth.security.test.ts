import { describe, expect, it } from "vitest";
import { client, seedProject } from "../../test/helpers";
import { generateToken } from "./tokens";

const api = client();

describe("bearer authentication", () => {
  it.each([
    ["no Authorization header", undefined, "unauthorized"],
    ["a Basic credential", "Basic dXNlcjpwYXNz", "invalid_token"],
    ["an empty bearer", "Bearer ", "invalid_token"],
    ["a random string", "Bearer not-a-token", "invalid_token"],
    ["a token with a bad checksum", `Bearer ${generateToken().slice(0, -1)}x`, "invalid_token"],
    ["a well-formed but unknown token", `Bearer ${generateToken()}`, "invalid_token"],
    ["the admin token with a suffix", "Bearer test-admin-token-0123456789abcdefghijklmnopX", "invalid_token"],
  ])("refuses %s with 401 and a Bearer challenge", async (_, header, code) => {
    const response = await api.json("/v2/projects", { token: null, headers: header ? { Authorization: header } : {} });
    expect(response.status).toBe(401);
    expect(response.body.code).toBe(code);
    expect(response.headers.get("www-authenticate")).toMatch(/^Bearer realm="edge-gateway"/);
  });

  it("guards project creation itself, and lets only the admin token create projects", async () => {
    const anonymous = await api.json("/v2/projects", { method: "POST", token: null, body: { name: "x" } });
    expect(anonymous.status).toBe(401);
    const { token } = await seedProject(api);
    const byAccount = await api.json("/v2/projects", { method: "POST", token, body: { name: "x" } });
    expect(byAccount.status).toBe(403);
    expect(byAccount.body.code).toBe("forbidden");
  });

  it("checks credentials before reading the body", async () => {
    const response = await api.json("/v2/projects", {
      method: "POST",
      token: null,
      rawBody: "{",
      headers: { "Content-Type": "application/json" },
    });
    expect(response.status).toBe(401);
  });
});

describe("cross-project isolation", () => {
  it("never lets project B's token read, change or confirm project A's resources", async () => {
    const a = await seedProject(api);
    const b = await seedProject(api);
    const buildA = await api.json<{ build_id: string }>(`/v2/projects/${a.projectId}/apps/${a.appId}/builds`, {
      method: "POST",
      token: a.token,
    });
    const base = `/v2/projects/${a.projectId}`;
    const build = `${base}/apps/${a.appId}/builds/${buildA.body.build_id}`;
    const attempts: [string, string, unknown?][] = [
      ["GET", base],
      ["GET", `${base}/service-accounts`],
      ["POST", `${base}/service-accounts`, { name: "x", expires_at: "2027-01-01T00:00:00Z" }],
      ["DELETE", `${base}/service-accounts/${a.serviceAccountId}`],
      ["GET", `${base}/apps`],
      ["POST", `${base}/apps`, { name: "intruder", region: "us-east-1", runtime: "cortex" }],
      ["GET", `${base}/apps/${a.appId}`],
      ["GET", `${base}/apps/${a.appId}/builds`],
      ["POST", `${base}/apps/${a.appId}/builds`],
      ["GET", build],
      ["PATCH", build, { status: "building" }],
      ["DELETE", build],
    ];
    const unknownProject = await api.json(`/v2/projects/proj_0000000000aaaaaaaaaaaaaaaaaaaa`, { token: b.token });
    for (const [method, path, body] of attempts) {
      const response = await api.json(path, { method, token: b.token, body });
      expect(response.status, `${method} ${path}`).toBe(404);
      // Indistinguishable from a project that does not exist, apart from the id it names.
      expect(response.body.detail).toBe(`No project with id '${a.projectId}'.`);
      expect(response.body.code).toBe(unknownProject.body.code);
    }
    const listed = await api.json<{ data: { project_id: string }[] }>("/v2/projects", { token: b.token });
    expect(listed.body.data.map((p) => p.project_id)).toEqual([b.projectId]);

    // Nothing changed: A's build is still queued, A's token still works, no app was added.
    const after = await api.json<{ status: string }>(build, { token: a.token });
    expect(after.body.status).toBe("queued");
    const apps = await api.json<{ data: unknown[] }>(`${base}/apps`, { token: a.token });
    expect(apps.body.data).toHaveLength(1);
  });

  it("does not find project A's app through project B's path", async () => {
    const a = await seedProject(api);
    const b = await seedProject(api);
    const response = await api.json(`/v2/projects/${b.projectId}/apps/${a.appId}`, { token: b.token });
    expect(response.status).toBe(404);
    expect(response.body.detail).toBe(`No app with id '${a.appId}'.`);
  });
});
