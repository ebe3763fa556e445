import { describe, expect, it } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { uniqueLabel } from "../../test/domains";
import { client, seedProject } from "../../test/helpers";
import { receiver } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import { drive, runWithWebhook } from "../../test/webhooks";

async function withDomain() {
  const api = client();
  const seed = await seedProject(api);
  const name = `${uniqueLabel("sec")}.wild.example.test`;
  const added = await api.json(`/v2/projects/${seed.projectId}/domains`, {
    method: "POST",
    token: seed.token,
    body: { domain: name, region: "us-east-1" },
  });
  expect(added.status).toBe(201);
  const read = async () => api.json<{ status: string }>(`/v2/projects/${seed.projectId}/domains/${name}`);
  return { api, seed, name, read, page: `/dashboard/projects/${seed.projectId}/domains` };
}

describe("dashboard domains and deliveries: nothing without a session", () => {
  it("redirects every page and refuses every action to sign-in, changing nothing", async () => {
    const { api, seed, name, read, page } = await withDomain();
    const v = visitor(api);
    await v.get("/dashboard/sign-in");
    for (const path of [
      page,
      `${page}/${name}`,
      `${page}/${name}/status`,
      `${page}/${name}/remove`,
      `/dashboard/projects/${seed.projectId}/webhook-deliveries`,
    ]) {
      const response = await v.get(path);
      expect(response.status, path).toBe(303);
      expect(response.headers.get("location"), path).toMatch(/^\/dashboard\/sign-in/);
    }
    for (const [path, fields] of [
      [page, { domain: `${uniqueLabel("x")}.example.test`, region: "us-east-1" }],
      [`${page}/${name}/validate`, {}],
      [`${page}/${name}/remove`, {}],
    ] as const) {
      const result = await v.post(path, fields);
      expect(result.status, path).toBe(303);
      expect(result.location, path).toMatch(/^\/dashboard\/sign-in/);
    }
    const after = await read();
    expect(after.status).toBe(200);
    expect(after.body.status).toBe("pending");
    const list = await api.json<{ data: unknown[] }>(`/v2/projects/${seed.projectId}/domains`);
    expect(list.body.data).toHaveLength(1);
  });
});

describe("dashboard domains: CSRF", () => {
  it("refuses add, validate and remove without the session's token or from another origin", async () => {
    const { api, seed, name, read, page } = await withDomain();
    const v = visitor(api);
    await v.signIn();
    await v.get(page);
    for (const [path, fields] of [
      [page, { domain: `${uniqueLabel("x")}.example.test`, region: "us-east-1" }],
      [`${page}/${name}/validate`, {}],
      [`${page}/${name}/remove`, {}],
    ] as const) {
      expect((await v.post(path, fields, { csrf: null })).status, path).toBe(403);
      expect((await v.post(path, fields, { origin: "https://evil.example" })).status, path).toBe(403);
    }
    const after = await read();
    expect(after.body.status).toBe("pending"); // not validated by a forged form
    const list = await api.json<{ data: unknown[] }>(`/v2/projects/${seed.projectId}/domains`);
    expect(list.body.data).toHaveLength(1);
  });
});

describe("dashboard domains and deliveries: one project's URL never reaches another's data", () => {
  it("answers a domain of project A under project B's URL with not-found, and leaves it alone", async () => {
    const { api, name, read } = await withDomain();
    const other = await seedProject(api);
    const wrong = `/dashboard/projects/${other.projectId}/domains/${name}`;
    const v = visitor(api);
    await v.signIn();
    for (const path of [wrong, `${wrong}/status`, `${wrong}/remove`])
      expect((await v.get(path)).status, path).toBe(404);
    expect((await v.post(`${wrong}/validate`, {})).status).toBe(404);
    expect((await v.post(`${wrong}/remove`, {})).status).toBe(404);
    expect(text((await v.get(`/dashboard/projects/${other.projectId}/domains`)).html)).not.toContain(name);
    const after = await read();
    expect(after.status).toBe(200);
    expect(after.body.status).toBe("pending");
  });

  it("shows a project's deliveries only on its own page, even filtered by the other's run id", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const other = await seedProject(api);
    const hook = await receiver([{ status: 200 }]);
    const run = await runWithWebhook(api, app, hook.url);
    await drive(api, run.messages[0]);
    const runId = JSON.parse(run.text).run_id as string;
    const v = visitor(api);
    await v.signIn();
    expect((await v.get(`/dashboard/projects/${app.projectId}/webhook-deliveries`)).html).toContain(runId);
    const foreign = await v.get(`/dashboard/projects/${other.projectId}/webhook-deliveries?run_id=${runId}`);
    expect(foreign.status).toBe(200);
    expect(text(foreign.html)).toContain("No deliveries for this run.");
    expect(foreign.html).not.toContain(hook.url);
  });

  it("passes a domain from the URL to the API encoded, so it cannot change the API path", async () => {
    const { api, seed, name, read } = await withDomain();
    const v = visitor(api);
    await v.signIn();
    const base = `/dashboard/projects/${seed.projectId}/domains`;
    // Decoded, these would be `…/domains/{name}/validate` or another project's path.
    for (const sneaky of [`${name}%2Fvalidate`, `..%2F..%2F${seed.projectId}%2Fdomains%2F${name}`]) {
      const page = await v.get(`${base}/${sneaky}/status`);
      expect(page.status, sneaky).toBe(404);
      expect((await v.post(`${base}/${sneaky}/remove`, {})).status, sneaky).toBe(404);
    }
    expect((await read()).status).toBe(200);
  });
});

describe("dashboard deliveries: input", () => {
  it("escapes the run filter and keeps it in the form", async () => {
    const api = client();
    const seed = await seedProject(api);
    const v = visitor(api);
    await v.signIn();
    const page = await v.get(
      `/dashboard/projects/${seed.projectId}/webhook-deliveries?run_id=${encodeURIComponent('"><script>alert(1)</script>')}`,
    );
    expect(page.html).not.toContain("<script>alert(1)");
    expect(page.html).toContain("&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;");
  });
});
