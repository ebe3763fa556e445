import { describe, expect, it } from "vitest";
import { client, seedBuild, seedProject } from "../../test/helpers";
import { text, visitor } from "../../test/dashboard-helpers";

describe("dashboard sign-in", () => {
  it("sends a visitor without a session to the sign-in page", async () => {
    const api = client();
    const page = await api.call("/dashboard/projects", { token: null });
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toBe("/dashboard/sign-in?next=%2Fdashboard%2Fprojects");
  });

  it("signs in with the admin token and sets a strict, HttpOnly, expiring session cookie", async () => {
    const api = client();
    const v = visitor(api);
    const result = await v.signIn();
    expect(result.status).toBe(303);
    expect(result.location).toBe("/dashboard/projects");
    const cookie = result.headers.get("set-cookie") ?? "";
    expect(cookie).toMatch(/^eg_session=/);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Expires=/);
    const projects = await v.get("/dashboard/projects");
    expect(projects.status).toBe(200);
    expect(text(projects.html)).toContain("Create a project");
  });

  it("answers a wrong token with a clear page and no session", async () => {
    const api = client();
    const v = visitor(api);
    const result = await v.signIn("not-the-admin-token");
    expect(result.status).toBe(403);
    expect(text(result.html)).toContain(
      "That is not the admin token of this installation. Check it and try again. You have 4 more attempts in the next 1 minute.",
    );
    expect((await v.get("/dashboard/projects")).status).toBe(303);
  });

  it("refuses the sixth attempt from one address within the window, even with the right token", async () => {
    const api = client();
    const v = visitor(api, { ip: "198.51.100.7" });
    for (let i = 0; i < 5; i++) expect((await v.signIn("wrong")).status).toBe(403);
    const blocked = await v.signIn();
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get("retry-after")).toBe("60");
    expect(text(blocked.html)).toContain(
      "Too many sign-in attempts from your address (at most 5 in 1 minute). This attempt was not checked. Try again in 1 minute.",
    );
    api.clock.advance(20 * 1000);
    const later = await v.signIn();
    expect(later.status).toBe(429);
    expect(later.headers.get("retry-after")).toBe("40");
    expect(text(later.html)).toContain("Try again in 40 seconds.");
    // Once the stated wait is over, the right token signs in: the lockout is short and ends by itself.
    api.clock.advance(40 * 1000);
    expect((await v.signIn()).status).toBe(303);
  });

  it("signs out: the cookie is cleared, and even a copy of it no longer works", async () => {
    const api = client();
    const v = visitor(api);
    await v.signIn();
    const copied = v.cookie;
    const out = await v.post("/dashboard/sign-out", {});
    expect(out.status).toBe(303);
    expect(out.headers.get("set-cookie")).toMatch(/Max-Age=0/);
    expect((await v.get("/dashboard/projects")).status).toBe(303);
    v.cookie = copied;
    expect((await v.get("/dashboard/projects")).status).toBe(303);
  });

  it("ends a session after its lifetime", async () => {
    const api = client();
    const v = visitor(api);
    await v.signIn();
    api.clock.advance(8 * 60 * 60 * 1000 - 1000);
    expect((await v.get("/dashboard/projects")).status).toBe(200);
    api.clock.advance(1000);
    expect((await v.get("/dashboard/projects")).status).toBe(303);
  });

  it("sends the strict security headers with every page", async () => {
    const api = client();
    const page = await visitor(api).get("/dashboard/sign-in");
    expect(page.headers.get("content-security-policy")).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    expect(page.headers.get("x-content-type-options")).toBe("nosniff");
    expect(page.headers.get("cache-control")).toBe("no-store");
    expect(page.html).not.toMatch(/<script>|style="/);
  });

  it("serves its script and stylesheet itself", async () => {
    const api = client();
    const js = await api.call("/dashboard/assets/dashboard.js", { token: null });
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toContain("javascript");
    const css = await api.call("/dashboard/assets/dashboard.css", { token: null });
    expect(css.headers.get("content-type")).toContain("text/css");
  });
});

describe("dashboard projects", () => {
  it("creates a project and lists it in the switcher of every page", async () => {
    const api = client();
    const v = visitor(api);
    await v.signIn();
    const created = await v.post("/dashboard/projects", { name: "Dashboard project" });
    expect(created.status).toBe(303);
    const apps = await v.get(created.location!);
    expect(apps.status).toBe(200);
    expect(apps.html).toMatch(/<option value="proj_[^"]+" selected="">Dashboard project<\/option>/);
    expect(text(apps.html)).toContain("No apps yet");
  });

  it("keeps the input and shows the API's reason when a project is refused", async () => {
    const api = client();
    const v = visitor(api);
    await v.signIn();
    const long = "x".repeat(101);
    const refused = await v.post("/dashboard/projects", { name: long });
    expect(refused.status).toBe(400);
    expect(text(refused.html)).toContain("The project was not created: Validation failed.");
    expect(refused.html).toContain(`value="${long}"`);
    expect(refused.html).toContain('aria-invalid="true"');
  });

  it("switches project keeping the tab", async () => {
    const api = client();
    const seed = await seedProject(api);
    const v = visitor(api);
    await v.signIn();
    const switched = await v.get(`/dashboard/switch?project=${seed.projectId}&tab=api-keys`);
    expect(switched.headers.get("location")).toBe(`/dashboard/projects/${seed.projectId}/api-keys`);
  });
});

describe("dashboard API keys", () => {
  it("creates a service account with an expiry date and shows its token once", async () => {
    const api = client();
    const seed = await seedProject(api);
    const v = visitor(api);
    await v.signIn();
    const page = await v.get(`/dashboard/projects/${seed.projectId}/api-keys`);
    expect(page.html).toContain('type="date"');
    expect(page.html).toContain('min="2026-11-22"');
    const posted = await v.post(`/dashboard/projects/${seed.projectId}/api-keys`, {
      name: "deploy-bot",
      expires_on: "2027-01-31",
      scopes: ["builds:read"],
    });
    // POST/redirect/GET: the token reaches the page through a sealed one-time cookie, not the URL.
    expect(posted.status).toBe(303);
    expect(posted.location).toBe(`/dashboard/projects/${seed.projectId}/api-keys`);
    expect(posted.headers.getSetCookie().join("\n")).not.toMatch(/egsa_/);
    const created = await v.get(posted.location!);
    expect(created.status).toBe(200);
    const token = /id="new-token" class="mono" type="text" readonly="" value="(egsa_[0-9A-Za-z]+)"/.exec(
      created.html,
    )?.[1];
    expect(token).toBeDefined();
    expect(text(created.html)).toContain("it is shown only once");
    expect(created.html).toContain('data-copy="new-token"');
    const read = await api.json(`/v2/projects/${seed.projectId}`, { token: token! });
    expect(read.status).toBe(200);
    const again = await v.get(`/dashboard/projects/${seed.projectId}/api-keys`);
    expect(again.html).not.toContain(token!);
    expect(again.html).toContain(`${token!.slice(0, 13)}…`);
    expect(again.html).toContain('datetime="2027-01-31T23:59:59.000Z"');
    // "Last used" says how fresh it is: the read above, as fresh as a once-a-minute write can tell.
    const row = /<tr>(?:(?!<\/tr>).)*?deploy-bot.*?<\/tr>/s.exec(again.html)?.[0] ?? "";
    expect(text(row)).toContain("in the last minute");
    expect(text(again.html)).toMatch(/may trail a key(?:'|&#39;)s latest use by up to a minute/);
  });

  it("offers the scopes with the defaults checked, gives the chosen ones, shows them in the list, and names a refused choice", async () => {
    const api = client();
    const seed = await seedProject(api);
    const v = visitor(api);
    await v.signIn();
    const page = await v.get(`/dashboard/projects/${seed.projectId}/api-keys`);
    expect(page.html).toContain('<input type="checkbox" name="scopes" value="builds:read" checked=""');
    expect(page.html).toMatch(/<input type="checkbox" name="scopes" value="service_accounts:write"\s*\/?>/);
    const posted = await v.post(`/dashboard/projects/${seed.projectId}/api-keys`, {
      name: "reader",
      expires_on: "2027-01-31",
      scopes: ["builds:read", "audit:read"],
    });
    expect(posted.status).toBe(303);
    const created = await v.get(posted.location!);
    const listed = await api.json<{ data: { name: string; scopes: string[] }[] }>(
      `/v2/projects/${seed.projectId}/service-accounts`,
    );
    expect(listed.body.data.find((a) => a.name === "reader")!.scopes).toEqual(["builds:read", "audit:read"]);
    expect(text(created.html)).toContain("audit:read");
    const none = await v.post(`/dashboard/projects/${seed.projectId}/api-keys`, {
      name: "nothing",
      expires_on: "2027-01-31",
    });
    expect(none.status).toBe(400);
    expect(none.html).toContain('id="scopes-error"');
    expect(none.html).toContain('value="nothing"');
  });

  it("creates one key however often the page after creating it is reloaded", async () => {
    const api = client();
    const seed = await seedProject(api);
    const v = visitor(api);
    await v.signIn();
    const page = `/dashboard/projects/${seed.projectId}/api-keys`;
    const posted = await v.post(page, { name: "reloaded", expires_on: "2027-01-31", scopes: ["builds:read"] });
    const shown = await v.get(posted.location!);
    expect(text(shown.html)).toContain("it is shown only once");
    const reloaded = await v.get(page);
    expect(reloaded.html).not.toContain('id="new-token"');
    const list = await api.json<{ data: { name: string }[] }>(`/v2/projects/${seed.projectId}/service-accounts`);
    expect(list.body.data.filter((a) => a.name === "reloaded")).toHaveLength(1);
  });

  it("shows a sealed token only in the session and on the page it was made for", async () => {
    const api = client();
    const seed = await seedProject(api);
    const other = await seedProject(api);
    const v = visitor(api);
    await v.signIn();
    const posted = await v.post(`/dashboard/projects/${seed.projectId}/api-keys`, {
      name: "sealed",
      expires_on: "2027-01-31",
      scopes: ["builds:read"],
    });
    const flash = v.cookie.split("; ").find((pair) => pair.startsWith("eg_flash="))!;
    expect(flash).toBeDefined();
    // Another project's page does not show it (and spends it).
    expect((await v.get(`/dashboard/projects/${other.projectId}/api-keys`)).html).not.toContain('id="new-token"');
    // Another signed-in session does not show it either.
    const thief = visitor(api);
    await thief.signIn();
    thief.cookie = `${thief.cookie}; ${flash}`;
    expect((await thief.get(posted.location!)).html).not.toContain('id="new-token"');
  });

  it("keeps the input and names the field when the expiry is refused", async () => {
    const api = client();
    const seed = await seedProject(api);
    const v = visitor(api);
    await v.signIn();
    const refused = await v.post(`/dashboard/projects/${seed.projectId}/api-keys`, {
      name: "too-late",
      expires_on: "2020-01-01",
      scopes: ["builds:read"],
    });
    expect(refused.status).toBe(400);
    expect(refused.html).toContain('value="too-late"');
    expect(refused.html).toContain('value="2020-01-01"');
    expect(text(refused.html)).toContain("must be in the future");
  });

  it("marks expired accounts and revokes with a confirmation", async () => {
    const api = client();
    const seed = await seedProject(api);
    const v = visitor(api);
    await v.signIn();
    api.clock.advance(31 * 24 * 3600 * 1000); // seedProject's token lived 30 days
    await v.signIn();
    const list = await v.get(`/dashboard/projects/${seed.projectId}/api-keys`);
    expect(text(list.html)).toContain("Expired");
    const confirm = await v.get(`/dashboard/projects/${seed.projectId}/api-keys/${seed.serviceAccountId}/revoke`);
    expect(text(confirm.html)).toContain("Revoke this service account?");
    const revoked = await v.post(`/dashboard/projects/${seed.projectId}/api-keys/${seed.serviceAccountId}/revoke`, {});
    expect(revoked.status).toBe(303);
    const after = await v.get(revoked.location!);
    expect(text(after.html)).toContain("“ci” was revoked");
    expect(text(after.html)).toContain("Revoked");
  });
});

describe("dashboard apps and builds", () => {
  it("shows apps with their current deployment and builds with their status", async () => {
    const api = client();
    const seed = await seedProject(api);
    const base = `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds`;
    const done = await seedBuild(api, seed);
    await api.json(`${base}/${done}`, { method: "PATCH", token: seed.token, body: { status: "building" } });
    await api.json(`${base}/${done}`, {
      method: "PATCH",
      token: seed.token,
      body: { status: "succeeded", origin_url: "https://origin.example/hello" },
    });
    const ongoing = await seedBuild(api, seed);
    const v = visitor(api);
    await v.signIn();
    const apps = await v.get(`/dashboard/projects/${seed.projectId}/apps`);
    expect(text(apps.html)).toContain("https://origin.example/hello");
    const builds = await v.get(`/dashboard/projects/${seed.projectId}/apps/${seed.appId}`);
    expect(text(builds.html)).toContain("Succeeded");
    expect(text(builds.html)).toContain("Queued");
    expect(builds.html).toContain(`/builds/${ongoing}/cancel`);
    expect(builds.html).not.toContain(`/builds/${done}/cancel`);
  });

  it("cancels an ongoing build, and explains why a finished one cannot be", async () => {
    const api = client();
    const seed = await seedProject(api);
    const build = await seedBuild(api, seed);
    const v = visitor(api);
    await v.signIn();
    const page = `/dashboard/projects/${seed.projectId}/apps/${seed.appId}`;
    const cancelled = await v.post(`${page}/builds/${build}/cancel`, {});
    expect(cancelled.status).toBe(303);
    expect(text((await v.get(cancelled.location!)).html)).toContain(`Build ${build} was cancelled`);
    const read = await api.json<{ status: string }>(
      `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${build}`,
    );
    expect(read.body.status).toBe("cancelled");

    const finished = await seedBuild(api, seed);
    await api.json(`/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${finished}`, {
      method: "PATCH",
      token: seed.token,
      body: { status: "failed" },
    });
    const refused = await v.post(`${page}/builds/${finished}/cancel`, {});
    expect(refused.status).toBe(409);
    expect(text(refused.html)).toContain("The build was not cancelled: Build is not cancellable.");
    expect(refused.html).not.toContain('"type":');
  });

  it("pages through builds with the API's cursor, and shows a bad cursor as a message", async () => {
    const api = client();
    const seed = await seedProject(api);
    const first = await seedBuild(api, seed);
    for (let i = 0; i < 50; i++) {
      api.clock.advance(1000); // ids sort by creation time
      await seedBuild(api, seed);
    }
    const v = visitor(api);
    await v.signIn();
    const path = `/dashboard/projects/${seed.projectId}/apps/${seed.appId}`;
    const one = await v.get(path);
    expect(one.html).not.toContain(first);
    const next = /href="([^"]+\?cursor=[^"]+)">Next page/.exec(one.html)?.[1];
    expect(next).toBeDefined();
    const two = await v.get(next!.replace(/&amp;/g, "&"));
    expect(two.html).toContain(first);
    expect(two.html).not.toContain("Next page");
    const bad = await v.get(`${path}?cursor=nonsense`);
    expect(text(bad.html)).toContain("The cursor is not one this API issued.");
  });

  it("shows a not-found page for a project that does not exist", async () => {
    const api = client();
    const v = visitor(api);
    await v.signIn();
    const page = await v.get("/dashboard/projects/proj_00000000000000000000000000000a/apps");
    expect(page.status).toBe(404);
    expect(text(page.html)).toContain("Project not found");
  });
});
