import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { newId } from "../../src/platform/ids";
import { client, seedBuild } from "../helpers";
import { startAsync } from "../async-runs";
import { person } from "../people";
import { seedRunnable } from "../runs";

const api = client();

interface OpenApi {
  paths: Record<string, Record<string, { servers?: { url: string }[] }>>;
}

/** Project A with one of everything, and a project B whose token tries to reach it. */
async function twoProjects() {
  const a = await seedRunnable(api);
  const buildId = await seedBuild(api, a);
  const domain = `iso-${Date.now().toString(36)}.example.org`;
  const created = await api.json(`/v2/projects/${a.projectId}/domains`, {
    method: "POST",
    token: a.token,
    body: { domain, region: "us-east-1" },
  });
  expect(created.status).toBe(201);
  // A member and an open invite of A, for the member and invite routes.
  const ownerEmail = `iso-owner-${Date.now().toString(36)}@example.test`;
  const invite = await api.json<{ invite_id: string }>(`/v2/projects/${a.projectId}/invites`, {
    method: "POST",
    body: { email: ownerEmail, role: "owner" },
  });
  await person(api, { email: ownerEmail });
  const members = await api.json<{ data: { member_id: string }[] }>(`/v2/projects/${a.projectId}/members`);
  const other = await api.json<{ invite_id: string }>(`/v2/projects/${a.projectId}/invites`, {
    method: "POST",
    body: { email: `iso-${invite.body.invite_id}@example.test`, role: "viewer" },
  });
  // A settled webhook delivery of A, its body kept (so a resend by the wrong project would go out).
  const deliveryId = newId("whd");
  const at = api.clock.now().getTime();
  await env.DB.prepare(
    "INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count, created_at, updated_at, completed_at, body) VALUES (?, ?, 'run_iso', 'https://example.com/hook', 0, 8, 'delivered', 1, ?, ?, ?, '{\"x\":1}')",
  )
    .bind(deliveryId, a.projectId, at, at, at)
    .run();
  const b = await seedRunnable(api);
  const asyncRun = await startAsync(api, a);
  expect(asyncRun.response.status).toBe(202);
  return {
    a: {
      ...a,
      buildId,
      domain,
      runId: asyncRun.body.run_id,
      deliveryId,
      memberId: members.body.data[0]!.member_id,
      inviteId: other.body.invite_id,
    },
    b,
  };
}

const BODIES: Record<string, unknown> = {
  post: {
    name: "x",
    region: "us-east-1",
    runtime: "cortex",
    domain: "x.example.org",
    expires_at: "2027-01-01T00:00:00Z",
  },
  patch: { status: "building" },
};

describe("cross-project access on every route of the API description", () => {
  it("answers 404 to project B's token on every operation of project A, and changes nothing of A", async () => {
    const { a, b } = await twoProjects();
    const spec = (await api.json<OpenApi>("/v2/openapi.json")).body;
    const values: Record<string, string> = {
      project_id: a.projectId,
      app_id: a.appId,
      build_id: a.buildId,
      service_account_id: a.serviceAccountId,
      domain: a.domain,
      app_name: a.appName,
      member_id: a.memberId,
      invite_id: a.inviteId,
      delivery_id: a.deliveryId,
      origin: "https://example.com",
      task_id: "wrt_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c",
      run_id: a.runId,
      // A run's `{path}`: the app's own (`run` is a cortex function's).
      path: "run",
    };
    const tried: string[] = [];
    for (const [template, operations] of Object.entries(spec.paths)) {
      if (!template.includes("{project_id}")) continue;
      const path = template.replace(/\{(\w+)\}/g, (_, name: string) => {
        expect(values[name], `a value for {${name}} in ${template}`).toBeDefined();
        return encodeURIComponent(values[name]!);
      });
      for (const method of Object.keys(operations).filter((m) =>
        ["get", "post", "patch", "put", "delete"].includes(m),
      )) {
        // The run proxy's operations name their own server (/v4); the rest are the document's (/v2).
        const full = `${operations[method]!.servers?.[0]?.url ?? "/v2"}${path}`;
        const res = await api.call(full, { method: method.toUpperCase(), token: b.token, body: BODIES[method] });
        const text = await res.text();
        tried.push(`${method.toUpperCase()} ${template}`);
        expect(res.status, `${method.toUpperCase()} ${template}: ${text}`).toBe(404);
        // Nothing of A that the caller did not put in the path comes back.
        for (const [name, value] of Object.entries(values)) {
          if (!full.includes(encodeURIComponent(value)))
            expect(text.includes(value), `${name} leaked by ${method} ${template}`).toBe(false);
        }
        expect(text).not.toContain(a.token.slice(0, 12));
      }
    }
    // Every project-scoped operation of the API was tried (new routes are covered without editing this test).
    expect(tried.length).toBeGreaterThanOrEqual(16);

    // A is untouched.
    const build = await api.json(`/v2/projects/${a.projectId}/apps/${a.appId}/builds/${a.buildId}`, { token: a.token });
    expect(build.body.status).toBe("queued");
    const accounts = await api.json<{ data: { id: string; revoked_at: string | null }[] }>(
      `/v2/projects/${a.projectId}/service-accounts`,
      { token: a.token },
    );
    expect(accounts.body.data.find((s) => s.id === a.serviceAccountId)?.revoked_at).toBeNull();
    expect((await api.json(`/v2/projects/${a.projectId}/domains/${a.domain}`, { token: a.token })).status).toBe(200);
    const run = await api.call(`/v4/${a.projectId}/${a.appName}/run`, { method: "POST", token: b.token, body: {} });
    expect(run.status).toBe(404);
    expect((await api.json(`/v4/${a.projectId}/${a.appName}/runs/${a.runId}`, { token: a.token })).body.status).toBe(
      "queued",
    );
  });

  it("never lists anything of project A in project B's own lists", async () => {
    const { a, b } = await twoProjects();
    const lists = ["apps", "service-accounts", "domains", "webhook-deliveries", `apps/${b.appId}/builds`].map(
      (p) => `/v2/projects/${b.projectId}/${p}`,
    );
    for (const path of lists) {
      const res = await api.call(path, { token: b.token });
      const text = await res.text();
      expect(res.status, path).toBe(200);
      for (const value of [a.projectId, a.appId, a.buildId, a.serviceAccountId, a.domain])
        expect(text.includes(value), `${value} in ${path}`).toBe(false);
    }
  });
});
