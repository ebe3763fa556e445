import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { actingAs } from "../auth/internal";
import { describe, expect, it } from "vitest";
import { ROLE_PERMISSIONS, ROLES } from "../auth/roles";
import { PERMISSIONS } from "../auth/permissions";
import { type Client, client } from "../../test/helpers";
import { asPerson, person, projectOwnedBy } from "../../test/people";

type List<T> = { data: T[]; next_cursor: string | null };
type Member = {
  member_id: string;
  user_id: string;
  role: string;
  ended_service_accounts: { id: string; name: string }[];
};
type Account = {
  id: string;
  token: string;
  name: string;
  revoked_at: string | null;
  created_by: { kind: string; id: string };
};

const inDays = (api: Client, days: number) => new Date(api.clock.now().getTime() + days * 86_400_000).toISOString();

/**
 * A project with an owner and a developer; the developer made a token (with `service_accounts:write`)
 * and that token made another; the owner and the operator made one each; an app to run.
 */
async function projectWithTokens(api: Client) {
  const ownerEmail = `tok-owner-${Date.now()}-${Math.random().toString(36).slice(2)}@example.test`;
  const projectId = await projectOwnedBy(api, ownerEmail);
  const owner = await person(api, { email: ownerEmail });
  const developer = await person(api);
  const asOwner = asPerson(api, owner);
  const asDeveloper = asPerson(api, developer);
  const added = await asOwner<Member>(`/v2/projects/${projectId}/members`, {
    method: "POST",
    body: { email: developer.email, role: "developer" },
  });
  expect(added.status).toBe(201);
  const create = async (
    as: (path: string, o: { method: string; body: unknown }) => Promise<{ status: number; body: unknown }>,
    name: string,
    scopes: readonly string[] = PERMISSIONS,
  ) => {
    const made = await as(`/v2/projects/${projectId}/service-accounts`, {
      method: "POST",
      body: { name, expires_at: inDays(api, 30), scopes },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    return made.body as Account;
  };
  const devToken = await create(asDeveloper, "dev-ci");
  const byToken = (path: string, o: { method: string; body: unknown }) =>
    api.json(path, { ...o, token: devToken.token });
  const grandchild = await create(byToken, "minted-by-dev-ci", ["runs:invoke", "builds:read"]);
  const ownerToken = await create(asOwner, "owner-ci");
  const operatorToken = await create((path, o) => api.json(path, o), "operator-ci");
  const app = await api.json(`/v2/projects/${projectId}/apps`, {
    method: "POST",
    body: { name: "hello", region: "us-east-1", runtime: "cortex" },
  });
  expect(app.status).toBe(201);
  const member = added.body;
  return { projectId, owner, developer, asOwner, asDeveloper, member, devToken, grandchild, ownerToken, operatorToken };
}

/** What a token gets from the management API and from the run path (cached there per isolate). */
async function reach(api: Client, projectId: string, token: string) {
  const management = (await api.json(`/v2/projects/${projectId}/apps`, { token })).status;
  const run = (await api.json(`/v4/${projectId}/hello/run`, { method: "POST", token, body: {} })).status;
  return { management: management === 401 ? "refused" : "accepted", run: run === 401 ? "refused" : "accepted" };
}

const auditOf = async (projectId: string) =>
  (
    await env.DB.prepare(
      "SELECT action, target_id, details, request_id FROM audit_log WHERE project_id = ? ORDER BY id",
    )
      .bind(projectId)
      .all<{
        action: string;
        target_id: string;
        details: string | null;
        request_id: string;
      }>()
  ).results.map((e) => ({ ...e, details: e.details ? (JSON.parse(e.details) as Record<string, unknown>) : null }));

describe("tokens end with their creator's access", () => {
  it("a token created by a removed developer stops working, and so does the token it created", async () => {
    const api = client();
    const t = await projectWithTokens(api);
    const accepted = { management: "accepted", run: "accepted" };
    const refused = { management: "refused", run: "refused" };
    // Used on the run path first, so this isolate has them cached.
    for (const token of [t.devToken, t.grandchild, t.ownerToken, t.operatorToken])
      expect(await reach(api, t.projectId, token.token)).toEqual(accepted);

    // The owner sees beforehand what the removal ends.
    const ending = await t.asOwner<List<Account>>(
      `/v2/projects/${t.projectId}/service-accounts?creator=${t.developer.id}`,
    );
    expect(ending.body.data.map((a) => a.name).sort()).toEqual(["dev-ci", "minted-by-dev-ci"]);
    expect(ending.body.data.find((a) => a.name === "dev-ci")!.created_by).toEqual({ kind: "user", id: t.developer.id });
    expect(ending.body.data.find((a) => a.name === "minted-by-dev-ci")!.created_by).toEqual({
      kind: "service_account",
      id: t.devToken.id,
    });

    const removed = await t.asOwner<Member>(`/v2/projects/${t.projectId}/members/${t.member.member_id}`, {
      method: "DELETE",
    });
    expect(removed.status).toBe(200);
    expect(removed.body.ended_service_accounts.map((a) => a.id).sort()).toEqual(
      [t.devToken.id, t.grandchild.id].sort(),
    );

    expect(await reach(api, t.projectId, t.devToken.token)).toEqual(refused);
    expect(await reach(api, t.projectId, t.grandchild.token)).toEqual(refused);
    // Tokens of people who stay, and the operator's, are untouched.
    expect(await reach(api, t.projectId, t.ownerToken.token)).toEqual(accepted);
    expect(await reach(api, t.projectId, t.operatorToken.token)).toEqual(accepted);

    const list = await api.json<List<Account>>(`/v2/projects/${t.projectId}/service-accounts?limit=100`);
    const revokedNames = list.body.data
      .filter((a) => a.revoked_at !== null)
      .map((a) => a.name)
      .sort();
    expect(revokedNames).toEqual(["dev-ci", "minted-by-dev-ci"]);

    // The audit log: the removal names the tokens it ended, and each token has its own revoke entry.
    const requestId = removed.headers.get("x-request-id");
    const entries = (await auditOf(t.projectId)).filter((e) => e.request_id === requestId);
    expect(entries.find((e) => e.action === "member.remove")?.details).toMatchObject({
      ended_tokens: expect.arrayContaining([t.devToken.id, t.grandchild.id]),
    });
    const revokes = entries.filter((e) => e.action === "service_account.revoke");
    expect(revokes.map((e) => e.target_id).sort()).toEqual([t.devToken.id, t.grandchild.id].sort());
    for (const e of revokes) expect(e.details).toMatchObject({ reason: "creator_removed", creator: t.developer.id });
  });

  it("a developer who leaves takes their tokens with them", async () => {
    const api = client();
    const t = await projectWithTokens(api);
    const left = await t.asDeveloper<Member>(`/v2/projects/${t.projectId}/members/${t.member.member_id}`, {
      method: "DELETE",
    });
    expect(left.status).toBe(200);
    expect(left.body.ended_service_accounts).toHaveLength(2);
    expect((await reach(api, t.projectId, t.devToken.token)).management).toBe("refused");
    expect((await reach(api, t.projectId, t.grandchild.token)).run).toBe("refused");
  });

  it("a token created by a developer made viewer stops working; made owner, it keeps working", async () => {
    const api = client();
    const t = await projectWithTokens(api);
    const promoted = await t.asOwner<Member>(`/v2/projects/${t.projectId}/members/${t.member.member_id}`, {
      method: "PATCH",
      body: { role: "owner" },
    });
    expect(promoted.body.ended_service_accounts).toEqual([]);
    expect((await reach(api, t.projectId, t.devToken.token)).management).toBe("accepted");
    const demoted = await t.asOwner<Member>(`/v2/projects/${t.projectId}/members/${t.member.member_id}`, {
      method: "PATCH",
      body: { role: "viewer" },
    });
    expect(demoted.status).toBe(200);
    expect(demoted.body.ended_service_accounts.map((a) => a.name).sort()).toEqual(["dev-ci", "minted-by-dev-ci"]);
    expect(await reach(api, t.projectId, t.devToken.token)).toEqual({ management: "refused", run: "refused" });
    expect(await reach(api, t.projectId, t.grandchild.token)).toEqual({ management: "refused", run: "refused" });
    expect((await reach(api, t.projectId, t.ownerToken.token)).management).toBe("accepted");
    const entries = (await auditOf(t.projectId)).filter((e) => e.request_id === demoted.headers.get("x-request-id"));
    expect(entries.filter((e) => e.action === "service_account.revoke").map((e) => e.details?.reason)).toEqual([
      "creator_role_changed",
      "creator_role_changed",
    ]);
    // Made a developer again, they do not get the old tokens back.
    await t.asOwner(`/v2/projects/${t.projectId}/members/${t.member.member_id}`, {
      method: "PATCH",
      body: { role: "developer" },
    });
    expect((await reach(api, t.projectId, t.devToken.token)).management).toBe("refused");
  });

  it("a refused removal (the last owner) ends none of their tokens", async () => {
    const api = client();
    const t = await projectWithTokens(api);
    const owners = (await t.asOwner<List<Member>>(`/v2/projects/${t.projectId}/members`)).body.data.filter(
      (m) => m.role === "owner",
    );
    const refused = await api.json(`/v2/projects/${t.projectId}/members/${owners[0]!.member_id}`, { method: "DELETE" });
    expect(refused.status).toBe(409);
    const demote = await api.json(`/v2/projects/${t.projectId}/members/${owners[0]!.member_id}`, {
      method: "PATCH",
      body: { role: "viewer" },
    });
    expect(demote.status).toBe(409);
    expect((await reach(api, t.projectId, t.ownerToken.token)).management).toBe("accepted");
  });

  it("a token created by a revoked token stops working (at any depth), its creator's siblings do not", async () => {
    const api = client();
    const t = await projectWithTokens(api);
    const revoked = await api.json<Account>(`/v2/projects/${t.projectId}/service-accounts/${t.devToken.id}`, {
      method: "DELETE",
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked_at).not.toBeNull();
    expect(await reach(api, t.projectId, t.grandchild.token)).toEqual({ management: "refused", run: "refused" });
    expect((await reach(api, t.projectId, t.ownerToken.token)).management).toBe("accepted");
    const entries = (await auditOf(t.projectId)).filter((e) => e.request_id === revoked.headers.get("x-request-id"));
    expect(entries.map((e) => [e.action, e.target_id]).sort()).toEqual(
      [
        ["service_account.revoke", t.devToken.id],
        ["service_account.revoke", t.grandchild.id],
      ].sort(),
    );
    expect(entries.find((e) => e.target_id === t.grandchild.id)?.details).toMatchObject({
      reason: "creator_revoked",
      creator: t.devToken.id,
    });
  });

  it("a removed developer's token can no longer mint tokens (refused like any revoked token)", async () => {
    const api = client();
    const t = await projectWithTokens(api);
    await t.asOwner(`/v2/projects/${t.projectId}/members/${t.member.member_id}`, { method: "DELETE" });
    const minted = await api.json(`/v2/projects/${t.projectId}/service-accounts`, {
      method: "POST",
      token: t.devToken.token,
      body: { name: "after-removal", expires_at: inDays(api, 1), scopes: ["builds:read"] },
    });
    expect(minted.status).toBe(401);
  });

  it("a token minted while its creator is being removed is not created: the insert itself checks the creator", async () => {
    const api = client();
    const t = await projectWithTokens(api);
    // A D1 that lets the removal land between the request's checks (membership, scopes) and its insert:
    // the creation's one batch (the insert and its audit entry) is the request's only batch.
    let raced = false;
    const racingDb = {
      prepare: (query: string) => env.DB.prepare(query),
      async batch(statements: D1PreparedStatement[]) {
        if (!raced) {
          raced = true;
          const removed = await t.asOwner(`/v2/projects/${t.projectId}/members/${t.member.member_id}`, {
            method: "DELETE",
          });
          expect(removed.status).toBe(200);
        }
        return env.DB.batch(statements);
      },
      exec: (query: string) => env.DB.exec(query),
    } as unknown as D1Database;
    // As the dashboard calls the API for the developer (in-process), on that D1.
    const request = new Request(`http://localhost/v2/projects/${t.projectId}/service-accounts`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "minted-during-removal", expires_at: inDays(api, 1), scopes: ["builds:read"] }),
    });
    actingAs(request, { kind: "user", userId: t.developer.id, email: t.developer.email });
    const ctx = createExecutionContext();
    const response = await api.worker.fetch(request, { ...env, DB: racingDb }, ctx);
    await waitOnExecutionContext(ctx);
    const minted = { status: response.status, body: (await response.json()) as { code: string } };
    expect(raced).toBe(true);
    expect(minted.status, JSON.stringify(minted.body)).toBe(403);
    expect(minted.body.code).toBe("forbidden");
    const all = await api.json<List<Account>>(`/v2/projects/${t.projectId}/service-accounts?limit=100`);
    expect(all.body.data.map((a) => a.name)).not.toContain("minted-during-removal");
    // And no audit entry claims it was created.
    expect(
      (await auditOf(t.projectId)).filter(
        (e) => e.action === "service_account.create" && JSON.stringify(e.details).includes("minted-during-removal"),
      ),
    ).toEqual([]);
  });

  it("every role either may not create tokens (its members' tokens end when they get it) or holds every permission (nothing to narrow)", () => {
    // Downgrading ends tokens or keeps them whole; a role with some but not all permissions that may
    // still create tokens would need its members' tokens narrowed, which this guard makes us build first.
    for (const role of ROLES) {
      const held = ROLE_PERMISSIONS[role];
      expect(!held.includes("service_accounts:write") || PERMISSIONS.every((p) => held.includes(p)), role).toBe(true);
    }
  });
});
