import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ORIGIN, text, visitor } from "../../test/dashboard-helpers";
import { ADMIN, client, seedBuild, seedProject } from "../../test/helpers";

describe("dashboard: nothing without a session", () => {
  it("redirects every page and refuses every action of a visitor who has not signed in", async () => {
    const api = client();
    const seed = await seedProject(api);
    const build = await seedBuild(api, seed);
    const p = `/dashboard/projects/${seed.projectId}`;
    const v = visitor(api);
    await v.get("/dashboard/sign-in"); // an anonymous session with a valid CSRF token
    for (const path of [
      "/dashboard",
      "/dashboard/projects",
      `${p}/apps`,
      `${p}/api-keys`,
      `${p}/apps/${seed.appId}`,
      `${p}/api-keys/${seed.serviceAccountId}/revoke`,
      "/dashboard/nope",
    ]) {
      const page = await v.get(path);
      expect(page.status, path).toBe(303);
      expect(page.headers.get("location"), path).toMatch(/^\/dashboard\/sign-in/);
    }
    const actions: [string, Record<string, string>][] = [
      ["/dashboard/projects", { name: "sneaky" }],
      [`${p}/api-keys`, { name: "sneaky", expires_on: "2027-01-01" }],
      [`${p}/api-keys/${seed.serviceAccountId}/revoke`, {}],
      [`${p}/apps/${seed.appId}/builds/${build}/cancel`, {}],
    ];
    for (const [path, fields] of actions) {
      const result = await v.post(path, fields);
      expect(result.status, path).toBe(303);
      expect(result.location, path).toMatch(/^\/dashboard\/sign-in/);
    }
    const read = await api.json<{ status: string }>(
      `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${build}`,
    );
    expect(read.body.status).toBe("queued");
  });

  it("treats a forged or foreign cookie as no session", async () => {
    const api = client();
    const v = visitor(api);
    v.cookie = "eg_session=eyJ2IjoxLCJzaWQiOiJ4IiwiaW4iOnRydWUsImV4cCI6OTk5OTk5OTk5OTk5OX0.AAAA";
    expect((await v.get("/dashboard/projects")).status).toBe(303);
  });

  it("is not served on a host that is not an API hostname", async () => {
    const api = client();
    const response = await api.call("/dashboard/sign-in", { token: null, host: "app.customer.example" });
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toContain("application/problem+json");
  });
});

describe("dashboard: CSRF", () => {
  async function signedIn() {
    const api = client();
    const seed = await seedProject(api);
    const build = await seedBuild(api, seed);
    const v = visitor(api);
    await v.signIn();
    await v.get("/dashboard/projects");
    return {
      api,
      seed,
      build,
      v,
      cancel: `/dashboard/projects/${seed.projectId}/apps/${seed.appId}/builds/${build}/cancel`,
    };
  }

  it("refuses a form without the session's token, with another session's token, or from another origin", async () => {
    const { api, seed, build, v, cancel } = await signedIn();
    const other = visitor(api);
    await other.signIn();
    const cases = [
      await v.post(cancel, {}, { csrf: null }),
      await v.post(cancel, {}, { csrf: other.csrf }),
      await v.post(cancel, {}, { origin: "https://evil.example" }),
      await v.post(cancel, {}, { origin: null }),
    ];
    for (const refused of cases) {
      expect(refused.status).toBe(403);
      expect(text(refused.html)).toContain("Request refused");
    }
    const read = await api.json<{ status: string }>(
      `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${build}`,
    );
    expect(read.body.status).toBe("queued");
  });

  it("accepts a same-origin form without Origin when Sec-Fetch-Site says same-origin", async () => {
    const { api, v, cancel } = await signedIn();
    const response = await api.call(cancel, {
      method: "POST",
      token: null,
      headers: {
        Cookie: v.cookie,
        "Content-Type": "application/x-www-form-urlencoded",
        "Sec-Fetch-Site": "same-origin",
      },
      rawBody: new URLSearchParams({ _csrf: v.csrf }).toString(),
    });
    expect(response.status).toBe(303);
  });

  it("refuses a JSON body even with a valid token (only the dashboard's own forms)", async () => {
    const { api, v, cancel } = await signedIn();
    const response = await api.call(cancel, {
      method: "POST",
      token: null,
      headers: { Cookie: v.cookie, Origin: ORIGIN },
      body: { _csrf: v.csrf },
    });
    expect(response.status).toBe(403);
  });

  it("issues a new session at sign-in: the token of the pre-sign-in session no longer works", async () => {
    const api = client();
    const v = visitor(api);
    await v.get("/dashboard/sign-in");
    const before = v.csrf;
    await v.signIn();
    expect(v.csrf).not.toBe(before);
    const refused = await v.post("/dashboard/projects", { name: "x" }, { csrf: before });
    expect(refused.status).toBe(403);
  });

  it("refuses a sign-in form posted from another site", async () => {
    const api = client();
    const v = visitor(api);
    await v.get("/dashboard/sign-in");
    const result = await v.post("/dashboard/sign-in", { token: "x" }, { origin: "https://evil.example" });
    expect(result.status).toBe(403);
  });
});

describe("dashboard: input", () => {
  it("escapes what users typed", async () => {
    const api = client();
    const v = visitor(api);
    await v.signIn();
    const created = await v.post("/dashboard/projects", { name: '<script>alert(1)</script>"' });
    const page = await v.get(created.location!);
    expect(page.html).not.toContain("<script>alert(1)");
    expect(page.html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
  });

  it("never redirects outside the dashboard after sign-in", async () => {
    for (const next of ["//evil.example/x", "https://evil.example", "/v2/projects", "/dashboard/../v2"]) {
      const api = client();
      const v = visitor(api);
      await v.get(`/dashboard/sign-in?next=${encodeURIComponent(next)}`);
      const result = await v.post("/dashboard/sign-in", { token: ADMIN, next });
      expect(result.location, next).toBe("/dashboard/projects");
    }
  });

  it("passes ids from the URL to the API encoded, so they cannot change the API path", async () => {
    const api = client();
    const seed = await seedProject(api);
    const v = visitor(api);
    await v.signIn();
    const page = await v.get(`/dashboard/projects/${seed.projectId}%2Fservice-accounts/apps`);
    expect(page.status).toBe(404);
  });

  it("refuses an oversized form", async () => {
    const api = client();
    const v = visitor(api);
    await v.signIn();
    const result = await v.post("/dashboard/projects", { name: "x".repeat(20_000) });
    expect(result.status).toBe(400);
    expect(text(result.html)).toContain("Form too large");
  });
});

describe("dashboard: cookie over https", () => {
  it("uses a __Host- cookie with Secure", async () => {
    const api = client();
    const ctx = createExecutionContext();
    const response = await api.worker.fetch(new Request("https://localhost/dashboard/sign-in"), env, ctx);
    await waitOnExecutionContext(ctx);
    const cookie = response.headers.get("set-cookie") ?? "";
    expect(cookie).toMatch(/^__Host-eg_session=/);
    expect(cookie).toMatch(/; Secure/);
    expect(cookie).toMatch(/; Path=\//);
    expect(response.headers.get("strict-transport-security")).toBe("max-age=31536000");
  });
});
