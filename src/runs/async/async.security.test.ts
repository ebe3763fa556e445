import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { consume, startAsync } from "../../../test/async-runs";
import { client } from "../../../test/helpers";
import { seedRunnable } from "../../../test/runs";
import { TEST_SECRETS } from "../../../test/secrets";

const api = client();

describe("async runs: who may read and cancel them", () => {
  it("answers another project's key, another app's path and an unknown id with the same 404, on GET and DELETE", async () => {
    const app = await seedRunnable(api);
    const other = await seedRunnable(api);
    const started = await startAsync(api, app);
    await consume(api, started.message);
    const path = new URL(started.body.status_url).pathname;
    const wrongApp = path.replace(`/${app.appName}/`, `/${other.appName}/`);
    const unknown = path.replace(started.body.run_id, `run_${"0".repeat(30)}`);
    for (const method of ["GET", "DELETE"]) {
      for (const [name, target, token] of [
        ["another project's key", path, other.token],
        ["another app's path", wrongApp, app.token],
        ["an unknown id", unknown, app.token],
        ["the run under another project's path", path.replace(app.projectId, other.projectId), other.token],
      ] as const) {
        const res = await api.json(target, { method, token });
        expect(res.status, `${method} ${name}`).toBe(404);
        expect(res.body.code, `${method} ${name}`).toBe("not_found");
        expect(JSON.stringify(res.body), `${method} ${name}`).not.toContain('"result"');
      }
    }
    const malformed = await api.json(path.replace(started.body.run_id, "run_x"), { token: app.token });
    expect(malformed.status).toBe(404);
  });

  it("asks for a run key: none or a bad one is a 401 with WWW-Authenticate; a JWT of the project and the admin token may read", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const path = new URL(started.body.status_url).pathname;
    for (const token of [null, "egsa_not-a-real-token"]) {
      const res = await api.json(path, { token });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
    const jwt = await sign({ project_id: app.projectId, exp: Math.floor(api.clock.now().getTime() / 1000) + 600 }, TEST_SECRETS.JWT_SECRET, "HS256");
    expect((await api.json(path, { token: jwt })).status).toBe(200);
    expect((await api.json(path)).status).toBe(200);
    const stranger = await sign({ project_id: "proj_0000000000aaaaaaaaaaaaaaaaaaaa", exp: Math.floor(api.clock.now().getTime() / 1000) + 600 }, TEST_SECRETS.JWT_SECRET, "HS256");
    expect((await api.json(path, { token: stranger })).status).toBe(404);
  });

  it("keeps the run list of /v2 to the project's own credentials", async () => {
    const app = await seedRunnable(api);
    const other = await seedRunnable(api);
    await startAsync(api, app);
    const own = await api.json<{ data: { run_id: string }[] }>(`/v2/projects/${app.projectId}/runs`, { token: app.token });
    expect(own.status).toBe(200);
    expect(own.body.data).toHaveLength(1);
    expect((await api.json(`/v2/projects/${app.projectId}/runs`, { token: other.token })).status).toBe(404);
  });

  it("never stores or forwards the webhook secret or the caller's Authorization in clear", async () => {
    const app = await seedRunnable(api);
    const secret = "a-secret-that-must-not-leak";
    const started = await startAsync(api, app, { query: `webhookEndpoint=${encodeURIComponent("http://127.0.0.1:9/hook")}`, headers: { "X-Webhook-Secret": secret } });
    const row = await env.DB.prepare("SELECT * FROM async_runs WHERE id = ?").bind(started.body.run_id).first();
    expect(JSON.stringify(row)).not.toContain(secret);
    expect(JSON.stringify(row)).not.toContain(app.token);
  });
});
