import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client, seedProject } from "../../test/helpers";
import { isWellFormedToken } from "../auth/tokens";
import { sha256Hex } from "../platform/crypto";

const api = client();
const DAY = 24 * 3600 * 1000;
const inDays = (days: number) => new Date(api.clock.now().getTime() + days * DAY).toISOString();

interface Account {
  id: string;
  token?: string;
  token_prefix: string;
  expires_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

describe("service accounts", () => {
  it("creates an account whose token is shown once, recognisable, and stored only as a SHA-256 hash", async () => {
    const { projectId } = await seedProject(api);
    const created = await api.json<Account>(`/v2/projects/${projectId}/service-accounts`, {
      method: "POST",
      body: { name: "deploy-bot", expires_at: inDays(90) },
    });
    expect(created.status).toBe(201);
    const token = created.body.token!;
    expect(token).toMatch(/^egsa_[0-9A-Za-z]{36}$/);
    expect(isWellFormedToken(token)).toBe(true);
    expect(token.startsWith(created.body.token_prefix)).toBe(true);

    const row = await env.DB.prepare("SELECT * FROM service_accounts WHERE id = ?")
      .bind(created.body.id)
      .first<Record<string, unknown>>();
    expect(row!.token_hash).toBe(await sha256Hex(token));
    expect(JSON.stringify(row)).not.toContain(token);

    const list = await api.json<{ data: Account[] }>(`/v2/projects/${projectId}/service-accounts`);
    const listed = list.body.data.find((a) => a.id === created.body.id)!;
    expect(listed.token).toBeUndefined();
    expect(listed.token_prefix).toBe(created.body.token_prefix);
  });

  it("refuses a missing, past or too distant expiry date", async () => {
    const { projectId } = await seedProject(api);
    for (const expires_at of [undefined, inDays(-1), inDays(0), inDays(800), "next tuesday"]) {
      const response = await api.json<{ code: string; errors: { field: string }[] }>(
        `/v2/projects/${projectId}/service-accounts`,
        {
          method: "POST",
          body: { name: "x", expires_at },
        },
      );
      expect(response.status, String(expires_at)).toBe(400);
      expect(response.body.errors[0]!.field).toBe("expires_at");
    }
  });

  it("lets a token work until it expires, then answers 401 with WWW-Authenticate", async () => {
    const { projectId } = await seedProject(api);
    const created = await api.json<Account>(`/v2/projects/${projectId}/service-accounts`, {
      method: "POST",
      body: { name: "short", expires_at: inDays(1) },
    });
    const token = created.body.token!;
    expect((await api.json(`/v2/projects/${projectId}`, { token })).status).toBe(200);
    api.clock.advance(DAY);
    const expired = await api.json<{ code: string; detail: string }>(`/v2/projects/${projectId}`, { token });
    expect(expired.status).toBe(401);
    expect(expired.body.code).toBe("invalid_token");
    expect(expired.body.detail).toContain("expired");
    expect(expired.headers.get("www-authenticate")).toMatch(/^Bearer realm="edge-gateway", error="invalid_token"/);
  });

  it("revokes: the token stops working at once, and revoking again answers the same", async () => {
    const { projectId, token, serviceAccountId } = await seedProject(api);
    const revoked = await api.json<Account>(`/v2/projects/${projectId}/service-accounts/${serviceAccountId}`, {
      method: "DELETE",
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked_at).toBe(api.clock.now().toISOString());
    const refused = await api.json<{ detail: string }>(`/v2/projects/${projectId}`, { token });
    expect(refused.status).toBe(401);
    expect(refused.body.detail).toContain("revoked");
    api.clock.advance(1000);
    const again = await api.json<Account>(`/v2/projects/${projectId}/service-accounts/${serviceAccountId}`, {
      method: "DELETE",
    });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(revoked.body);
  });

  it("keeps last_used_at, writing it at most once a minute per token", async () => {
    const { projectId, token, serviceAccountId } = await seedProject(api);
    const lastUsed = async () =>
      (await env.DB.prepare("SELECT last_used_at FROM service_accounts WHERE id = ?")
        .bind(serviceAccountId)
        .first<{ last_used_at: number | null }>())!.last_used_at;
    // Seeding used the token once (to create the app).
    expect(await lastUsed()).toBe(api.clock.now().getTime());
    api.clock.advance(61_000);
    await api.json(`/v2/projects/${projectId}`, { token });
    const first = await lastUsed();
    expect(first).toBe(api.clock.now().getTime());
    api.clock.advance(30_000);
    await api.json(`/v2/projects/${projectId}`, { token });
    expect(await lastUsed()).toBe(first);
    api.clock.advance(31_000);
    await api.json(`/v2/projects/${projectId}`, { token });
    expect(await lastUsed()).toBe(api.clock.now().getTime());
    const listed = await api.json<{ data: Account[] }>(`/v2/projects/${projectId}/service-accounts`);
    expect(listed.body.data.find((a) => a.id === serviceAccountId)!.last_used_at).toBe(api.clock.now().toISOString());
  });

  it("answers 404 for an unknown account id", async () => {
    const { projectId } = await seedProject(api);
    const response = await api.json(`/v2/projects/${projectId}/service-accounts/sa_0000000000aaaaaaaaaaaaaaaaaaaa`, {
      method: "DELETE",
    });
    expect(response.status).toBe(404);
  });
});
