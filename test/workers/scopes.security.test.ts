import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { DEFAULT_PERMISSIONS, PERMISSIONS, type Permission } from "../../src/auth/permissions";
import { startAsync } from "../async-runs";
import { client } from "../helpers";
import {
  documentOperations,
  inDays as inDaysOf,
  pathOf,
  projectWithEverything,
  unique,
  writeBody,
} from "../operations";
import { recordedRun, seedRunnable } from "../runs";
import { TEST_SECRETS } from "../secrets";

const api = client();
const inDays = (days: number) => inDaysOf(api, days);

/** A token of the project with exactly `scopes`, made by the operator. */
async function tokenWith(projectId: string, scopes: readonly Permission[], expiresAt = inDays(30)) {
  const created = await api.json<{ id: string; token: string; scopes: string[] }>(
    `/v2/projects/${projectId}/service-accounts`,
    {
      method: "POST",
      body: { name: unique("scoped"), expires_at: expiresAt, scopes },
    },
  );
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body;
}

describe("scopes in the OpenAPI document", () => {
  it("names one scope from the closed list on every operation, apart from reading projects, the operator's project creation and the member routes, which name a role", async () => {
    const ops = await documentOperations(api);
    const unscoped = ops.filter((o) => o.scopes.length === 0 && !o.role).map((o) => `${o.method} ${o.template}`);
    expect(unscoped.sort()).toEqual(["get /projects", "get /projects/{project_id}", "post /projects"]);
    // Members and invites are the people's: no token permission grants them, so they name a role and no
    // scope, and every one of them does (not one left to "any credential of the project").
    const people = ops.filter((o) => /\/(members|invites)/.test(o.template));
    expect(people.length).toBe(7);
    for (const op of people) {
      expect(op.scopes, `${op.method} ${op.template}`).toEqual([]);
      expect(op.role, `${op.method} ${op.template}`).toBe(
        op.method === "get" && op.template.endsWith("/members")
          ? "member"
          : op.method === "delete" && op.template.endsWith("{member_id}")
            ? "member"
            : "owner",
      );
    }
    expect(ops.filter((o) => o.role).length).toBe(people.length);
    for (const op of ops.filter((o) => o.scopes.length > 0)) {
      expect(op.scopes, `${op.method} ${op.template}`).toHaveLength(1);
      expect(PERMISSIONS, `${op.method} ${op.template}`).toContain(op.scopes[0]);
    }
  });

  it("refuses every scoped operation with 403 insufficient_scope to a token lacking its scope, and allows it with only that scope", async () => {
    const tried: string[] = [];
    for (const op of await documentOperations(api)) {
      const { method, template, scopes } = op;
      const scope = scopes[0] as Permission | undefined;
      if (!scope) continue;
      const { seed, values } = await projectWithEverything(api);
      const path = pathOf(op, values);
      const label = `${method.toUpperCase()} ${template}`;

      const without = await tokenWith(
        seed.projectId,
        PERMISSIONS.filter((p) => p !== scope),
      );
      const refused = await api.call(path, {
        method: method.toUpperCase(),
        token: without.token,
        body: writeBody(api, op, [scope]),
      });
      const problem = (await refused.json()) as { code: string; detail: string };
      expect(refused.status, label).toBe(403);
      expect(problem.code, label).toBe("insufficient_scope");
      expect(refused.headers.get("www-authenticate"), label).toMatch(
        new RegExp(`^Bearer realm="edge-gateway", error="insufficient_scope", .*scope="${scope}"$`),
      );

      // A run's record is its maker's, and making a run takes `runs:invoke`: the record's reader also makes one.
      const isRecord = template === "/projects/{project_id}/runs/{run_id}";
      const withOnly = await tokenWith(seed.projectId, isRecord ? [scope, "runs:invoke"] : [scope]);
      // An async run is its caller's (another caller of the project gets 404): the token reads and
      // cancels a run of its own.
      const ownRun = isRecord
        ? await recordedRun(api, seed, withOnly.token)
        : template.includes("{run_id}")
          ? (await startAsync(api, seed, { token: withOnly.token })).body.run_id
          : undefined;
      const allowed = await api.call(ownRun ? pathOf(op, { ...values, run_id: ownRun }) : path, {
        method: method.toUpperCase(),
        token: withOnly.token,
        body: writeBody(api, op, [scope]),
      });
      // An event stream (`…/runs/events`) stays open: its status is the answer, its body is let go.
      const said = allowed.headers.get("content-type")?.startsWith("text/event-stream")
        ? await allowed.body!.cancel().then(() => "an event stream")
        : await allowed.text();
      expect(allowed.status, `${label}: ${said}`).toBeGreaterThanOrEqual(200);
      expect(allowed.status, label).toBeLessThan(300);
      tried.push(label);
    }
    expect(tried.length).toBeGreaterThanOrEqual(17);
  }, 120_000);

  it("lets a token without runs:invoke not run its project's apps, and one with only runs:invoke run them", async () => {
    const seed = await seedRunnable(api);
    const without = await tokenWith(
      seed.projectId,
      PERMISSIONS.filter((p) => p !== "runs:invoke"),
    );
    const refused = await api.call(seed.runPath, { method: "POST", token: without.token, body: {} });
    expect(refused.status).toBe(403);
    expect(refused.headers.get("www-authenticate")).toMatch(/error="insufficient_scope", .*scope="runs:invoke"$/);
    const only = await tokenWith(seed.projectId, ["runs:invoke"]);
    expect((await api.call(seed.runPath, { method: "POST", token: only.token, body: {} })).status).toBe(200);
    // A key of another project still learns nothing: 404 before any scope is looked at.
    const other = await seedRunnable(api);
    const stranger = await tokenWith(
      other.projectId,
      PERMISSIONS.filter((p) => p !== "runs:invoke"),
    );
    expect((await api.call(seed.runPath, { method: "POST", token: stranger.token, body: {} })).status).toBe(404);
  });
});

describe("tokens minted by tokens", () => {
  it("gives a new account the default scopes when none are named, and shows scopes in lists", async () => {
    const seed = await seedRunnable(api);
    const created = await api.json<{ id: string; scopes: string[] }>(
      `/v2/projects/${seed.projectId}/service-accounts`,
      {
        method: "POST",
        body: { name: "defaults", expires_at: inDays(10) },
      },
    );
    expect(created.body.scopes).toEqual([...DEFAULT_PERMISSIONS]);
    expect(created.body.scopes).not.toContain("service_accounts:write");
    // Resending deliveries is asked for by name, never a default.
    expect(created.body.scopes).not.toContain("deliveries:write");
    const list = await api.json<{ data: { id: string; scopes: string[] }[] }>(
      `/v2/projects/${seed.projectId}/service-accounts`,
    );
    expect(list.body.data.find((a) => a.id === created.body.id)!.scopes).toEqual([...DEFAULT_PERMISSIONS]);
  });

  it("refuses scope escalation: a token gives only scopes it has", async () => {
    const seed = await seedRunnable(api);
    const minter = await tokenWith(seed.projectId, ["service_accounts:write", "builds:read"]);
    const post = (body: unknown) =>
      api.json<{ code: string; scopes: string[] }>(`/v2/projects/${seed.projectId}/service-accounts`, {
        method: "POST",
        token: minter.token,
        body,
      });

    const escalate = await api.call(`/v2/projects/${seed.projectId}/service-accounts`, {
      method: "POST",
      token: minter.token,
      body: { name: "wider", expires_at: inDays(5), scopes: ["builds:read", "builds:write", "runs:invoke"] },
    });
    expect(escalate.status).toBe(403);
    expect(((await escalate.json()) as { code: string }).code).toBe("insufficient_scope");
    expect(escalate.headers.get("www-authenticate")).toMatch(
      /scope="runs:invoke builds:write"|scope="builds:write runs:invoke"/,
    );
    // Naming no scopes asks for the defaults, which this token does not hold either.
    expect((await post({ name: "defaults", expires_at: inDays(5) })).status).toBe(403);
    // A subset is fine, and so is its own full set (service_accounts:write included).
    expect((await post({ name: "narrower", expires_at: inDays(5), scopes: ["builds:read"] })).body.scopes).toEqual([
      "builds:read",
    ]);
    expect(
      (await post({ name: "same", expires_at: inDays(5), scopes: ["builds:read", "service_accounts:write"] })).status,
    ).toBe(201);

    const rows = await env.DB.prepare("SELECT name FROM service_accounts WHERE project_id = ?")
      .bind(seed.projectId)
      .all<{ name: string }>();
    expect(rows.results.map((r) => r.name)).not.toContain("wider");
  });

  it("refuses expiry extension: a token's tokens expire no later than it does", async () => {
    const seed = await seedRunnable(api);
    const ownExpiry = inDays(3);
    const minter = await tokenWith(seed.projectId, ["service_accounts:write", "builds:read"], ownExpiry);
    const later = await api.json<{ code: string; errors: { field: string }[] }>(
      `/v2/projects/${seed.projectId}/service-accounts`,
      {
        method: "POST",
        token: minter.token,
        body: { name: "outlives", expires_at: inDays(4), scopes: ["builds:read"] },
      },
    );
    expect(later.status).toBe(400);
    expect(later.body.errors[0]!.field).toBe("expires_at");
    const same = await api.json(`/v2/projects/${seed.projectId}/service-accounts`, {
      method: "POST",
      token: minter.token,
      body: { name: "same-day", expires_at: ownExpiry, scopes: ["builds:read"] },
    });
    expect(same.status).toBe(201);
    // The operator is bounded only by the 2-year limit.
    expect(
      (
        await api.json(`/v2/projects/${seed.projectId}/service-accounts`, {
          method: "POST",
          body: { name: "op", expires_at: inDays(700) },
        })
      ).status,
    ).toBe(201);
  });

  it("refuses unknown, empty and malformed scope lists with 400", async () => {
    const seed = await seedRunnable(api);
    for (const scopes of [["admin"], [], "builds:read", ["builds:read", 7]]) {
      const response = await api.json<{ errors: { field: string }[] }>(
        `/v2/projects/${seed.projectId}/service-accounts`,
        {
          method: "POST",
          body: { name: "bad", expires_at: inDays(5), scopes },
        },
      );
      expect(response.status, JSON.stringify(scopes)).toBe(400);
      expect(response.body.errors[0]!.field.startsWith("scopes")).toBe(true);
    }
  });
});

describe("run JWTs name one project", () => {
  it("refuses a JWT whose project_id is the old `*` wildcard, or anything but a project id", async () => {
    const seed = await seedRunnable(api);
    const exp = Math.floor(api.clock.now().getTime() / 1000) + 600;
    for (const projectId of ["*", "proj_*", `${seed.projectId} `, ""]) {
      const jwt = await sign({ project_id: projectId, exp }, TEST_SECRETS.JWT_SECRET, "HS256");
      const response = await api.call(seed.runPath, { method: "POST", token: jwt, body: {} });
      expect(response.status, JSON.stringify(projectId)).toBe(401);
      expect(response.headers.get("www-authenticate")).toContain('error="invalid_token"');
    }
    const good = await sign({ project_id: seed.projectId, exp }, TEST_SECRETS.JWT_SECRET, "HS256");
    expect((await api.call(seed.runPath, { method: "POST", token: good, body: {} })).status).toBe(200);
  });
});

describe("tokens from before scopes", () => {
  it("keep working with the default scopes after the migration's backfill", async () => {
    const seed = await seedRunnable(api);
    // A row as the migration finds it: the new column's default ('[]') filled in by ALTER TABLE.
    const old = await tokenWith(seed.projectId, ["builds:read"]);
    await env.DB.prepare("UPDATE service_accounts SET scopes = '[]' WHERE id = ?").bind(old.id).run();
    const migration = env.TEST_MIGRATIONS.find((m) => m.name.endsWith("_scopes_audit.sql"))!;
    const backfill = migration.queries.find((q) => /UPDATE\s+`?service_accounts`?\s+SET\s+`?scopes`?/i.test(q))!;
    await env.DB.prepare(backfill).run();

    const list = await api.json<{ data: { id: string; scopes: string[] }[] }>(
      `/v2/projects/${seed.projectId}/service-accounts`,
    );
    // The default of that time: every scope but service_accounts:write (deliveries:write left the
    // default later; tokens that had it keep it). usage:read came later still (its own backfill, 0009).
    expect(list.body.data.find((a) => a.id === old.id)!.scopes).toEqual(
      PERMISSIONS.filter((p) => p !== "service_accounts:write" && p !== "usage:read"),
    );
    expect((await api.json(`/v2/projects/${seed.projectId}/apps`, { token: old.token })).status).toBe(200);
    expect((await api.call(seed.runPath, { method: "POST", token: old.token, body: {} })).status).toBe(200);
    expect((await api.json(`/v2/projects/${seed.projectId}/service-accounts`, { token: old.token })).status).toBe(403);
    // A token that could run (and so list the project's runs) keeps listing them after 0009's backfill.
    const usageMigration = env.TEST_MIGRATIONS.find((m) => m.name.endsWith("_usage.sql"))!;
    await env.DB.prepare(usageMigration.queries.find((q) => /UPDATE\s+`?service_accounts`?/i.test(q))!).run();
    const after = await api.json<{ data: { id: string; scopes: string[] }[] }>(
      `/v2/projects/${seed.projectId}/service-accounts`,
    );
    expect(after.body.data.find((a) => a.id === old.id)!.scopes).toEqual([
      ...PERMISSIONS.filter((p) => p !== "service_accounts:write" && p !== "usage:read"),
      "usage:read",
    ]);
    expect((await api.json(`/v2/projects/${seed.projectId}/runs`, { token: old.token })).status).toBe(200);
    // Rows that already had scopes were left alone.
    const seedRow = list.body.data.find((a) => a.id === seed.serviceAccountId)!;
    expect(seedRow.scopes).toEqual([...PERMISSIONS]);
  });
});
