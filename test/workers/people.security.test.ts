import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { text, visitor } from "../dashboard-helpers";
import { newId } from "../../src/platform/ids";
import { client, seedBuild } from "../helpers";
import { asPerson, person, projectOwnedBy, signInAs } from "../people";
import { recordedRun, seedRunnable } from "../runs";

const api = client();

interface OpenApi {
  paths: Record<string, Record<string, { security?: unknown; servers?: { url: string }[] }>>;
}

const METHODS = ["get", "post", "patch", "put", "delete"];
const BODIES: Record<string, unknown> = {
  post: {
    name: "x",
    region: "us-east-1",
    runtime: "cortex",
    domain: "x.example.org",
    expires_at: "2027-01-01T00:00:00Z",
    email: "x@example.test",
    role: "owner",
  },
  patch: { status: "building", role: "owner" },
};

/** A project with one of everything: an app with a build and a run on record (its id also names no async run: 404 or 403), a domain, a service account, a member, an invite. */
async function fullProject(ownerEmail: string) {
  const seed = await seedRunnable(api);
  const buildId = await seedBuild(api, seed);
  const domain = `people-${Date.now().toString(36)}.example.org`;
  expect(
    (
      await api.json(`/v2/projects/${seed.projectId}/domains`, {
        method: "POST",
        token: seed.token,
        body: { domain, region: "us-east-1" },
      })
    ).status,
  ).toBe(201);
  const invite = await api.json<{ invite_id: string }>(`/v2/projects/${seed.projectId}/invites`, {
    method: "POST",
    body: { email: ownerEmail, role: "owner" },
  });
  const owner = await person(api, { email: ownerEmail });
  const open = await api.json<{ invite_id: string }>(`/v2/projects/${seed.projectId}/invites`, {
    method: "POST",
    body: { email: `open-${invite.body.invite_id}@example.test`, role: "viewer" },
  });
  const members = await api.json<{ data: { member_id: string }[] }>(`/v2/projects/${seed.projectId}/members`);
  // An async run (queued: its message is kept, not sent).
  // A settled webhook delivery, its body kept, so resending it is a write to try.
  const deliveryId = newId("whd");
  const at = api.clock.now().getTime();
  await env.DB.prepare(
    "INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count, created_at, updated_at, completed_at, body) VALUES (?, ?, 'run_people', 'https://example.com/hook', 0, 8, 'delivered', 1, ?, ?, ?, '{\"x\":1}')",
  )
    .bind(deliveryId, seed.projectId, at, at, at)
    .run();
  const values: Record<string, string> = {
    delivery_id: deliveryId,
    origin: "https://example.com",
    task_id: "wrt_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c",
    project_id: seed.projectId,
    app_id: seed.appId,
    build_id: buildId,
    service_account_id: seed.serviceAccountId,
    domain,
    app_name: seed.appName,
    member_id: members.body.data[0]!.member_id,
    invite_id: open.body.invite_id,
    run_id: await recordedRun(api, seed),
  };
  return { seed, owner, values };
}

/** Every operation of the API description on a project, with the path filled from `values`. */
async function operations(values: Record<string, string>) {
  const spec = (await api.json<OpenApi>("/v2/openapi.json")).body;
  const found: { method: string; template: string; path: string; scopes: string[] }[] = [];
  for (const [template, ops] of Object.entries(spec.paths)) {
    if (!template.includes("{project_id}")) continue;
    // The run proxy's operations (their own server, /v4) take run keys and tokens, never a person's
    // session; the cross-project sweep of isolation.security.test.ts covers them.
    const methods = Object.keys(ops).filter(
      (m) => METHODS.includes(m) && (ops[m]!.servers?.[0]?.url ?? "/v2") === "/v2",
    );
    if (methods.length === 0) continue;
    const path = `/v2${template.replace(/\{(\w+)\}/g, (_, name: string) => {
      expect(values[name], `a value for {${name}} in ${template}`).toBeDefined();
      return encodeURIComponent(values[name]!);
    })}`;
    for (const method of methods) {
      const security = (ops[method]!.security ?? []) as Record<string, string[]>[];
      found.push({ method: method.toUpperCase(), template, path, scopes: security.flatMap((s) => s.bearerAuth ?? []) });
    }
  }
  return found;
}

describe("people see and change only their own projects", () => {
  it("answers 404 to a member (even an owner) of project A on every operation of project B, and changes nothing of B", async () => {
    const a = await fullProject(`a-owner-${Date.now()}@example.test`);
    const b = await fullProject(`b-owner-${Date.now()}@example.test`);
    const asA = asPerson(api, a.owner);
    const tried = [];
    for (const { method, template, path } of await operations(b.values)) {
      const response = await asA(path, { method, body: BODIES[method.toLowerCase()] });
      tried.push(template);
      expect(response.status, `${method} ${template}: ${JSON.stringify(response.body)}`).toBe(404);
      for (const [name, value] of Object.entries(b.values)) {
        if (!path.includes(encodeURIComponent(value)))
          expect(JSON.stringify(response.body).includes(value), `${name} leaked by ${method} ${template}`).toBe(false);
      }
    }
    expect(tried.length).toBeGreaterThanOrEqual(20);
    const listed = await asA<{ data: { project_id: string }[] }>("/v2/projects");
    expect(listed.body.data.map((p) => p.project_id)).toEqual([a.values.project_id]);

    // B is untouched.
    const build = await api.json(
      `/v2/projects/${b.values.project_id}/apps/${b.values.app_id}/builds/${b.values.build_id}`,
    );
    expect(build.body.status).toBe("queued");
    const members = await api.json<{ data: { role: string }[] }>(`/v2/projects/${b.values.project_id}/members`);
    expect(members.body.data.map((m) => m.role)).toEqual(["owner"]);
    expect((await api.json(`/v2/projects/${b.values.project_id}/domains/${b.values.domain}`)).status).toBe(200);
  });
});

describe("a viewer reads and writes nothing", () => {
  it("answers 403 to a viewer on every write operation of the API description, and nothing changes", async () => {
    const { owner, values } = await fullProject(`v-owner-${Date.now()}@example.test`);
    const viewer = await person(api);
    const projectId = values.project_id!;
    expect(
      (
        await asPerson(api, owner)(`/v2/projects/${projectId}/members`, {
          method: "POST",
          body: { email: viewer.email, role: "viewer" },
        })
      ).status,
    ).toBe(201);
    const asViewer = asPerson(api, viewer);
    const before = await Promise.all(
      ["apps", "service-accounts", "domains", "members", "invites"].map((list) =>
        api.json(`/v2/projects/${projectId}/${list}`),
      ),
    );

    const writes = (await operations(values)).filter((op) => op.method !== "GET");
    const spec = (await api.json<OpenApi>("/v2/openapi.json")).body;
    // Writes outside a project (creating one) too.
    for (const [template, ops] of Object.entries(spec.paths)) {
      if (template.includes("{project_id}")) continue;
      for (const method of Object.keys(ops).filter((m) => METHODS.includes(m) && m !== "get"))
        writes.push({ method: method.toUpperCase(), template, path: `/v2${template}`, scopes: [] });
    }
    for (const { method, template, path } of writes) {
      const response = await asViewer(path, { method, body: BODIES[method.toLowerCase()] });
      expect(response.status, `${method} ${template}: ${JSON.stringify(response.body)}`).toBe(403);
    }
    expect(writes.length).toBeGreaterThanOrEqual(12);
    // Reading is a viewer's right: every read that needs no scope or a `:read` one (the document names
    // it), but the owners' list of invites.
    const reads = (await operations(values)).filter((op) => op.method === "GET");
    let readable = 0;
    for (const { method, template, path, scopes } of reads) {
      const allowed = !template.includes("/invites") && scopes.every((scope) => scope.endsWith(":read"));
      if (allowed) readable++;
      expect((await asViewer(path)).status, `${method} ${template} (${scopes.join(" ")})`).toBe(allowed ? 200 : 403);
    }
    expect(readable).toBeGreaterThanOrEqual(6);

    const after = await Promise.all(
      ["apps", "service-accounts", "domains", "members", "invites"].map((list) =>
        api.json(`/v2/projects/${projectId}/${list}`),
      ),
    );
    expect(after.map((r) => r.body)).toEqual(before.map((r) => r.body));
    const build = await api.json(`/v2/projects/${projectId}/apps/${values.app_id}/builds/${values.build_id}`);
    expect(build.body.status).toBe("queued");
  });
});

describe("the dashboard by role", () => {
  it("shows a viewer no control to change anything, and says why", async () => {
    const ownerEmail = `dash-owner-${Date.now()}@example.test`;
    const projectId = await projectOwnedBy(api, ownerEmail);
    const owner = await person(api, { email: ownerEmail });
    const viewer = await person(api);
    expect(
      (
        await asPerson(api, owner)(`/v2/projects/${projectId}/members`, {
          method: "POST",
          body: { email: viewer.email, role: "viewer" },
        })
      ).status,
    ).toBe(201);
    const v = visitor(api);
    await signInAs(v, api, viewer);
    const o = visitor(api);
    await signInAs(o, api, owner);
    for (const [tab, control] of [
      ["api-keys", "Create service account"],
      ["domains", "Add domain"],
      ["members", "Invite"],
    ] as const) {
      const page = await v.get(`/dashboard/projects/${projectId}/${tab}`);
      expect(page.status, tab).toBe(200);
      expect(text(page.html), tab).toContain("Your role in this project is viewer");
      expect(page.html, tab).not.toContain(`>${control}<`);
      // The owner has the control the viewer lacks.
      expect((await o.get(`/dashboard/projects/${projectId}/${tab}`)).html, tab).toContain(`>${control}<`);
    }
    // The runs list is read with usage:read, which every role holds: a viewer reads it as the owner
    // does (only the async runs under way, read with runs:invoke, are left out for a viewer).
    const runs = await v.get(`/dashboard/projects/${projectId}/runs`);
    expect(runs.status).toBe(200);
    expect(text(runs.html)).not.toContain("Your role in this project is viewer");
    expect(text(runs.html)).toContain("No runs yet.");
    expect(text((await o.get(`/dashboard/projects/${projectId}/runs`)).html)).toContain("No runs yet.");
    const other = await projectOwnedBy(api, `someone-${Date.now()}@example.test`);
    expect((await v.get(`/dashboard/projects/${other}/apps`)).status).toBe(404);
    const projects = await v.get("/dashboard/projects");
    expect(projects.html).toContain(projectId);
    expect(projects.html).not.toContain(other);
    expect(text(projects.html)).not.toContain("Create a project");
  });
});
