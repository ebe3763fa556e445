import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import {
  documentOperations,
  inDays as inDaysOf,
  isManagement,
  pathOf,
  projectWithEverything,
  writeBody,
} from "../../test/operations";

const api = client();
const inDays = (days: number) => inDaysOf(api, days);

interface Entry {
  id: string;
  project_id: string;
  actor: { kind: string; id: string; name: string | null };
  action: string;
  target: { type: string; id: string };
  details: Record<string, unknown> | null;
  client_ip: string | null;
  request_id: string;
  at: string;
}

const entriesOf = async (projectId: string) =>
  (
    await env.DB.prepare("SELECT request_id, action FROM audit_log WHERE project_id = ?")
      .bind(projectId)
      .all<{ request_id: string; action: string }>()
  ).results;

const fixture = () => projectWithEverything(api);

describe("audit log", () => {
  it("gets exactly one entry for every write operation of the OpenAPI document, naming actor, action, target, address and request", async () => {
    const tried: string[] = [];
    for (const op of (await documentOperations(api)).filter((o) => o.method !== "get" && isManagement(o))) {
      const { method, template } = op;
      const { seed, values } = await fixture();
      const path = pathOf(op, values);
      const label = `${method.toUpperCase()} ${template}`;
      // Creating projects is the operator's, and so (with the owners) is managing members; everything
      // else is done by the project's own token.
      const newProject = template === "/projects";
      const asOperator = newProject || /\/(members|invites)/.test(template);
      const before = await entriesOf(seed.projectId);
      const response = await api.call(path, {
        method: method.toUpperCase(),
        token: asOperator ? undefined : seed.token,
        body: writeBody(api, op, undefined, values),
        headers: { "CF-Connecting-IP": "203.0.113.9" },
      });
      const text = await response.text();
      expect(response.status, `${label}: ${text}`).toBeLessThan(300);
      const requestId = response.headers.get("x-request-id")!;
      const projectId = newProject ? (JSON.parse(text) as { project_id: string }).project_id : seed.projectId;

      const after = await entriesOf(projectId);
      expect(after.length - (newProject ? 0 : before.length), label).toBe(1);
      const mine = after.filter((e) => e.request_id === requestId);
      expect(mine, label).toHaveLength(1);
      // Every write route names its action (a route that names none gets `METHOD /route` and a warning).
      expect(mine[0]!.action, label).toMatch(/^[a-z_]+\.[a-z_]+$/);

      const listed = await api.json<{ data: Entry[] }>(`/v2/projects/${projectId}/audit-log?action=${mine[0]!.action}`);
      const entry = listed.body.data.find((e) => e.request_id === requestId)!;
      expect(entry.actor, label).toEqual(
        asOperator
          ? { kind: "operator", id: "operator", name: null }
          : { kind: "service_account", id: seed.serviceAccountId, name: "ci" },
      );
      expect(entry.client_ip, label).toBe("203.0.113.9");
      expect(entry.at, label).toBe(api.clock.now().toISOString());
      expect(entry.target.id, label).toBeTruthy();
      tried.push(label);
    }
    expect(tried.length).toBeGreaterThanOrEqual(10);
  }, 120_000);

  it("records the write and its entry together, and nothing for a write that was refused or changed nothing new", async () => {
    const { seed } = await fixture();
    const before = (await entriesOf(seed.projectId)).length;
    const apps = `/v2/projects/${seed.projectId}/apps`;
    // A conflict inside the write's own batch (ON CONFLICT DO NOTHING): no entry.
    expect(
      (
        await api.call(apps, {
          method: "POST",
          token: seed.token,
          body: { name: seed.appName, region: "us-east-1", runtime: "cortex" },
        })
      ).status,
    ).toBe(409);
    // Refused before the write: validation, scope.
    expect(
      (
        await api.call(apps, {
          method: "POST",
          token: seed.token,
          body: { name: "Bad Name", region: "us-east-1", runtime: "cortex" },
        })
      ).status,
    ).toBe(400);
    const limited = await api.json<{ token: string }>(`/v2/projects/${seed.projectId}/service-accounts`, {
      method: "POST",
      body: { name: "reader", expires_at: inDays(5), scopes: ["builds:read"] },
    });
    expect(
      (
        await api.call(apps, {
          method: "POST",
          token: limited.body.token,
          body: { name: "x", region: "us-east-1", runtime: "cortex" },
        })
      ).status,
    ).toBe(403);
    expect((await entriesOf(seed.projectId)).length).toBe(before + 1); // the reader's own creation
  });

  it("lists newest first, pages with next_cursor, and filters by actor and action", async () => {
    const { seed } = await fixture();
    for (let i = 0; i < 3; i++) {
      api.clock.advance(1000);
      await api.call(`/v2/projects/${seed.projectId}/apps/${seed.appId}/builds`, { method: "POST", token: seed.token });
    }
    const base = `/v2/projects/${seed.projectId}/audit-log`;
    const all = await api.json<{ data: Entry[]; next_cursor: string | null }>(`${base}?limit=100`);
    const times = all.body.data.map((e) => e.at);
    expect(times).toEqual([...times].sort().reverse());

    const first = await api.json<{ data: Entry[]; next_cursor: string }>(`${base}?limit=2`);
    expect(first.body.data).toHaveLength(2);
    const second = await api.json<{ data: Entry[] }>(`${base}?limit=100&cursor=${first.body.next_cursor}`);
    expect([...first.body.data, ...second.body.data].map((e) => e.id)).toEqual(all.body.data.map((e) => e.id));

    const builds = await api.json<{ data: Entry[] }>(`${base}?action=build.start&actor=${seed.serviceAccountId}`);
    // The deployed build and the queued one of the fixture, and the three above.
    expect(builds.body.data).toHaveLength(5);
    expect(builds.body.data.every((e) => e.action === "build.start" && e.actor.id === seed.serviceAccountId)).toBe(
      true,
    );
    const byOperator = await api.json<{ data: Entry[] }>(`${base}?actor=operator`);
    // The fixture's three invites are the operator's too.
    expect(byOperator.body.data.map((e) => e.action).sort()).toEqual([
      "domain.create",
      "invite.create",
      "invite.create",
      "invite.create",
      "project.create",
      "service_account.create",
      "service_account.create",
    ]);
    expect((await api.json(`${base}?bogus=1`)).status).toBe(400);
  });

  it("keeps project A's entries from project B: 404 on A's log, nothing of A in B's", async () => {
    const a = await fixture();
    const b = await fixture();
    const foreign = await api.json(`/v2/projects/${a.seed.projectId}/audit-log`, { token: b.seed.token });
    expect(foreign.status).toBe(404);
    const own = await api.call(`/v2/projects/${b.seed.projectId}/audit-log?limit=100`, { token: b.seed.token });
    const text = await own.text();
    expect(own.status).toBe(200);
    // (App names are short and may be part of B's own; A's app id holds A's project id.)
    for (const [name, value] of Object.entries(a.values))
      if (name !== "app_name" && name !== "path") expect(text, name).not.toContain(value);
  });

  it("needs audit:read", async () => {
    const { seed } = await fixture();
    const created = await api.json<{ token: string }>(`/v2/projects/${seed.projectId}/service-accounts`, {
      method: "POST",
      body: { name: "no-audit", expires_at: inDays(5), scopes: ["builds:read"] },
    });
    const response = await api.json<{ code: string }>(`/v2/projects/${seed.projectId}/audit-log`, {
      token: created.body.token,
    });
    expect(response.status).toBe(403);
    expect(response.body.code).toBe("insufficient_scope");
  });
});
