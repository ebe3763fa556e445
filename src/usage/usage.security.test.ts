import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { type Permission, PERMISSIONS } from "../auth/permissions";
import { client } from "../../test/helpers";
import { receiver } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import { runWithWebhook } from "../../test/webhooks";
import { ledgerOf } from "./ledger-client";

/** The usage API against the attacks it must hold: other projects, missing scopes, leaks into records, bad input. */

const api = client();
const PATHS = ["runs", "usage", "webhook-receivers"] as const;

async function tokenWith(projectId: string, scopes: readonly Permission[]) {
  const expires = new Date(api.clock.now().getTime() + 7 * 24 * 3600 * 1000).toISOString();
  const created = await api.json<{ id: string; token: string }>(`/v2/projects/${projectId}/service-accounts`, {
    method: "POST",
    body: { name: `t-${scopes.length}-${Math.random()}`, expires_at: expires, scopes },
  });
  expect(created.status).toBe(201);
  return created.body;
}

/** Every row the project's ledger holds, as text. */
async function ledgerText(projectId: string): Promise<string> {
  return runInDurableObject(ledgerOf(env, projectId), async (_instance, state) => {
    const tables = state.storage.sql
      .exec<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\'",
      )
      .toArray();
    return JSON.stringify(tables.map(({ name }) => state.storage.sql.exec(`SELECT * FROM "${name}"`).toArray()));
  });
}

describe("usage: another project's credential", () => {
  it.each(PATHS)(
    "gets 404 on /v2/projects/{id}/%s, and its own list holds none of the other project's runs",
    async (path) => {
      const app = await seedRunnable(api);
      const stranger = await seedRunnable(api);
      await (await api.call(app.runPath, { token: app.token })).text();
      const res = await api.json(`/v2/projects/${app.projectId}/${path}`, { token: stranger.token });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ code: "not_found" });
      const own = await api.json<{ data: unknown[] }>(`/v2/projects/${stranger.projectId}/runs`, {
        token: stranger.token,
      });
      expect(own.body.data).toEqual([]);
    },
  );
});

describe("usage: scopes", () => {
  it("refuses the runs list and the figures without usage:read (403 naming it), the receivers' health without deliveries:read", async () => {
    const app = await seedRunnable(api);
    const withoutUsage = await tokenWith(
      app.projectId,
      PERMISSIONS.filter((p) => p !== "usage:read"),
    );
    for (const path of ["runs", "usage"]) {
      const res = await api.call(`/v2/projects/${app.projectId}/${path}`, { token: withoutUsage.token });
      expect(res.status, path).toBe(403);
      expect(res.headers.get("www-authenticate")).toContain('scope="usage:read"');
    }
    const onlyUsage = await tokenWith(app.projectId, ["usage:read"]);
    for (const path of ["runs", "usage"])
      expect((await api.call(`/v2/projects/${app.projectId}/${path}`, { token: onlyUsage.token })).status, path).toBe(
        200,
      );
    const receivers = await api.call(`/v2/projects/${app.projectId}/webhook-receivers`, { token: onlyUsage.token });
    expect(receivers.status).toBe(403);
    expect(receivers.headers.get("www-authenticate")).toContain('scope="deliveries:read"');
  });

  it("shows a service account the runs it made, the operator every run of the project", async () => {
    const app = await seedRunnable(api);
    const second = await tokenWith(app.projectId, PERMISSIONS);
    await (await api.call(app.runPath, { token: app.token })).text();
    api.clock.advance(1);
    await (await api.call(app.runPath, { token: second.token })).text();
    const mine = await api.json<{ data: { caller: string }[] }>(`/v2/projects/${app.projectId}/runs`, {
      token: second.token,
    });
    expect(mine.body.data.map((r) => r.caller)).toEqual([`sa:${second.id}`]);
    const all = await api.json<{ data: { caller: string; run_id: string }[] }>(`/v2/projects/${app.projectId}/runs`);
    expect(all.body.data.map((r) => r.caller)).toEqual([`sa:${second.id}`, `sa:${app.serviceAccountId}`]);
    // One record read by id follows the same rule: another service account's run is as absent as none.
    const theirs = all.body.data[1]!;
    const read = (token?: string) => api.call(`/v2/projects/${app.projectId}/runs/${theirs.run_id}`, { token });
    expect((await read(second.token)).status).toBe(404);
    expect((await read(app.token)).status).toBe(200);
    expect((await read()).status).toBe(200);
  });
});

describe("usage: records hold no credential, secret or body", () => {
  it("keeps neither the run key, nor the webhook secret, nor the bodies, nor the query in the ledger", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver();
    const secret = "whsec-never-in-a-record-0123456789";
    const marker = "body-marker-never-in-a-record";
    const { response } = await runWithWebhook(api, app, `${hook.url}?private=query-marker`, {
      secret,
      body: { [marker]: marker },
      query: "q=query-marker-2",
    });
    expect(response.status).toBe(200);
    const stored = await ledgerText(app.projectId);
    expect(stored).toContain(response.headers.get("x-run-id")!);
    for (const leak of [app.token, app.token.slice(0, 12), secret, marker, "query-marker", "Bearer"])
      expect(stored).not.toContain(leak);
    const listed = JSON.stringify((await api.json(`/v2/projects/${app.projectId}/runs`, { token: app.token })).body);
    for (const leak of [app.token, secret, marker, "query-marker"]) expect(listed).not.toContain(leak);
  });

  it("puts no failed authentication, no other project's key and no unknown app on the project's record", async () => {
    const app = await seedRunnable(api);
    const stranger = await seedRunnable(api);
    expect((await api.call(app.runPath, { token: "gw_not-a-real-token" })).status).toBe(401);
    expect((await api.call(app.runPath, { token: null })).status).toBe(401);
    expect((await api.call(app.runPath, { token: stranger.token })).status).toBe(404);
    expect((await api.call(`/v4/${app.projectId}/no-such-app/run`, { token: app.token })).status).toBe(404);
    expect((await api.json<{ data: unknown[] }>(`/v2/projects/${app.projectId}/runs`)).body.data).toEqual([]);
  });
});

describe("usage: bad input", () => {
  it.each([
    ["from after to", "?from=2026-11-21T12:00:00Z&to=2026-11-21T11:00:00Z", "from"],
    ["too many points", "?interval=minute&from=2026-11-15T12:00:00Z&to=2026-11-21T12:00:00Z", "interval"],
    ["older than the rollups' 90 days", "?interval=day&from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z", "from"],
    ["an unknown interval", "?interval=week", "interval"],
    ["a malformed time", "?from=yesterday", "from"],
    ["an unknown parameter", "?project_id=proj_x", "project_id"],
  ])("answers 400 validation_failed for %s", async (_what, query, field) => {
    const app = await seedRunnable(api);
    const res = await api.json<{ code: string; errors?: { field: string }[] }>(
      `/v2/projects/${app.projectId}/usage${query}`,
      { token: app.token },
    );
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toContain("application/problem+json");
    expect(res.body.errors?.map((e) => e.field)).toContain(field);
  });

  it("answers 400 for a runs list with an empty range or a cursor it did not issue, and treats a hostile app_name as a name", async () => {
    const app = await seedRunnable(api);
    await (await api.call(app.runPath, { token: app.token })).text();
    const base = `/v2/projects/${app.projectId}/runs`;
    expect(
      (await api.json(`${base}?from=2026-11-21T12:00:00Z&to=2026-11-21T12:00:00Z`, { token: app.token })).status,
    ).toBe(400);
    expect((await api.json(`${base}?cursor=bm90LWEtY3Vyc29y`, { token: app.token })).status).toBe(400);
    expect((await api.json(`${base}?status=3xx`, { token: app.token })).status).toBe(400);
    const injected = await api.json<{ data: unknown[] }>(`${base}?app_name=${encodeURIComponent("x' OR 1=1 --")}`, {
      token: app.token,
    });
    expect(injected.status).toBe(200);
    expect(injected.body.data).toEqual([]);
  });
});
