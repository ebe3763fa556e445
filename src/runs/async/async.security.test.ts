import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { consume, type KeptRunAddress, keptRows, keptSql, poll, startAsync, sweepKept } from "../../../test/async-runs";
import { text, visitor } from "../../../test/dashboard-helpers";
import { client } from "../../../test/helpers";
import { asPerson, person, signInAs } from "../../../test/people";
import { seedRunnable } from "../../../test/runs";
import { TEST_SECRETS } from "../../../test/secrets";
import { QUEUED_MAX_MS, RUNNING_MAX_MS } from "./sweep";

const api = client();

/** A run JWT of `projectId`, for subject `sub` (none: a JWT without `sub`). */
const jwtOf = (projectId: string, sub?: string) =>
  sign(
    {
      project_id: projectId,
      ...(sub === undefined ? {} : { sub }),
      exp: Math.floor(api.clock.now().getTime() / 1000) + 600,
    },
    TEST_SECRETS.JWT_SECRET,
    "HS256",
  );

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

  it("asks for a run key: none or a bad one is a 401 with WWW-Authenticate; the caller that made it and the admin token may read", async () => {
    const app = await seedRunnable(api);
    const jwt = await jwtOf(app.projectId, "reader");
    const started = await startAsync(api, app, { token: jwt });
    const path = new URL(started.body.status_url).pathname;
    for (const token of [null, "egsa_not-a-real-token"]) {
      const res = await api.json(path, { token });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
    expect((await api.json(path, { token: jwt })).status).toBe(200);
    expect((await api.json(path, { token: await jwtOf(app.projectId, "reader") })).status).toBe(200);
    expect((await api.json(path)).status).toBe(200);
    const stranger = await sign(
      { project_id: "proj_0000000000aaaaaaaaaaaaaaaaaaaa", exp: Math.floor(api.clock.now().getTime() / 1000) + 600 },
      TEST_SECRETS.JWT_SECRET,
      "HS256",
    );
    expect((await api.json(path, { token: stranger })).status).toBe(404);
  });

  it("keeps the run list of /v2 to the project's own credentials", async () => {
    const app = await seedRunnable(api);
    const other = await seedRunnable(api);
    await startAsync(api, app);
    const own = await api.json<{ data: { run_id: string }[] }>(`/v2/projects/${app.projectId}/async-runs`, {
      token: app.token,
    });
    expect(own.status).toBe(200);
    expect(own.body.data).toHaveLength(1);
    expect((await api.json(`/v2/projects/${app.projectId}/async-runs`, { token: other.token })).status).toBe(404);
  });

  it("never stores or forwards the webhook secret or the caller's Authorization in clear", async () => {
    const app = await seedRunnable(api);
    const secret = "a-secret-that-must-not-leak";
    const started = await startAsync(api, app, {
      query: `webhookEndpoint=${encodeURIComponent("http://127.0.0.1:9/hook")}`,
      headers: { "X-Webhook-Secret": secret },
    });
    // Its row is its keeper's (none in D1), with the secret sealed.
    expect(await env.DB.prepare("SELECT * FROM async_runs WHERE id = ?").bind(started.body.run_id).first()).toBeNull();
    const rows = await keptSql(started.body, "SELECT * FROM async_runs WHERE id = ?", started.body.run_id);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.webhook_secret).not.toBeNull();
    expect(JSON.stringify(rows[0])).not.toContain(secret);
    expect(JSON.stringify(rows[0])).not.toContain(app.token);
  });
});

describe("a run's status stream: the status read's authorization and isolation", () => {
  const streamOf = (path: string, token: string | null) =>
    api.json(path, { token, headers: { Accept: "text/event-stream" } });

  it("answers another project's key, another caller of the project and an unknown id with the read's 404, before any follower joins", async () => {
    const app = await seedRunnable(api);
    const other = await seedRunnable(api);
    const alice = await jwtOf(app.projectId, "alice");
    const started = await startAsync(api, app, { token: alice });
    const path = new URL(started.body.status_url).pathname;
    for (const [name, target, token] of [
      ["another project's key", path, other.token],
      ["another subject of the project", path, await jwtOf(app.projectId, "bob")],
      ["a service account of the project", path, app.token],
      ["the run under another project's path", path.replace(app.projectId, other.projectId), other.token],
      ["an unknown id", path.replace(started.body.run_id, `run_${"0".repeat(30)}`), alice],
    ] as const) {
      const res = await streamOf(target, token);
      expect(res.status, name).toBe(404);
      expect(res.headers.get("content-type"), name).toBe("application/problem+json");
      expect(res.body.code, name).toBe("not_found");
    }
    // Refused before the stream marked the run followed: its owner tells nobody.
    const [row] = await keptSql(started.body, "SELECT followed FROM async_runs WHERE id = ?", started.body.run_id);
    expect(row?.followed).toBe(0);
  });

  it("asks for a run key: none or a bad one is a 401 with WWW-Authenticate; a bad Last-Event-ID is refused before the key is even looked up", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const path = new URL(started.body.status_url).pathname;
    for (const token of [null, "egsa_not-a-real-token"]) {
      const res = await streamOf(path, token);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
    const bad = await api.json(path, { token: null, headers: { Accept: "text/event-stream", "Last-Event-ID": "x" } });
    expect(bad.status).toBe(400);
  });
});

describe("async runs are bound to the caller that made them, not to the project", () => {
  beforeEach(() => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("a second JWT subject of the same project cannot read or cancel the first's run: 404 on GET and DELETE, and the run stays queued", async () => {
    const app = await seedRunnable(api);
    const alice = await jwtOf(app.projectId, "alice");
    const started = await startAsync(api, app, { token: alice });
    expect(started.response.status).toBe(202);
    const path = new URL(started.body.status_url).pathname;
    const others = {
      "another subject": await jwtOf(app.projectId, "bob"),
      "a JWT without sub": await jwtOf(app.projectId),
      "a service account of the project": app.token,
    };
    for (const method of ["GET", "DELETE"]) {
      for (const [name, token] of Object.entries(others)) {
        const res = await api.json(path, { method, token });
        expect(res.status, `${method} by ${name}`).toBe(404);
        expect(res.body.code, `${method} by ${name}`).toBe("not_found");
        expect(JSON.stringify(res.body), `${method} by ${name}`).not.toMatch(/"status":"queued"|"result"/);
      }
    }
    expect((await poll(api, started.body.status_url, alice)).body.status).toBe("queued");
    // The operator still reads (and may cancel) every run.
    expect((await api.json(path)).status).toBe(200);
  });

  it("another caller re-using an Idempotency-Key gets a fresh run, never the first caller's run_id; each caller's replay answers its own", async () => {
    const app = await seedRunnable(api);
    const [alice, bob] = [await jwtOf(app.projectId, "alice"), await jwtOf(app.projectId, "bob")];
    const key = { "Idempotency-Key": `order-${Date.now()}` };
    const first = await startAsync(api, app, { token: alice, headers: key, body: { amount: 1 } });
    expect(first.response.status).toBe(202);

    // The attack: the same key with another body. Before, a 422 named alice's run_id.
    const second = await startAsync(api, app, { token: bob, headers: key, body: { amount: 2 } });
    expect(second.response.status).toBe(202);
    expect(second.body.run_id).not.toBe(first.body.run_id);
    expect(second.text).not.toContain(first.body.run_id);
    expect(second.response.headers.get("idempotent-replayed")).toBeNull();
    expect(second.message).toBeDefined();
    // And with the same body: still bob's own run, not a replay of alice's.
    const sameBody = await startAsync(api, app, {
      token: await jwtOf(app.projectId, "carol"),
      headers: key,
      body: { amount: 1 },
    });
    expect(sameBody.response.status).toBe(202);
    expect(sameBody.text).not.toContain(first.body.run_id);

    // Within one caller the key keeps its meaning: a replay, and a 422 for another request.
    const replay = await startAsync(api, app, { token: bob, headers: key, body: { amount: 2 } });
    expect(replay.body.run_id).toBe(second.body.run_id);
    expect(replay.response.headers.get("idempotent-replayed")).toBe("true");
    const reused = await startAsync(api, app, { token: alice, headers: key, body: { amount: 3 } });
    expect(reused.response.status).toBe(422);
    expect(reused.body).toMatchObject({ code: "idempotency_key_reused", run_id: first.body.run_id });
    // A service account is a caller of its own too.
    const account = await startAsync(api, app, { headers: key, body: { amount: 1 } });
    expect(account.response.status).toBe(202);
    expect([first.body.run_id, second.body.run_id, sameBody.body.run_id]).not.toContain(account.body.run_id);
  });

  it("lists every run to the project's owners and the operator (the dashboard's Runs page), and to anyone else only their own", async () => {
    const app = await seedRunnable(api);
    const alice = await jwtOf(app.projectId, "alice");
    const byAlice = await startAsync(api, app, { token: alice });
    const byAccount = await startAsync(api, app);
    const listed = async (json: (path: string) => Promise<{ status: number; body: unknown }>) => {
      const res = await json(`/v2/projects/${app.projectId}/async-runs`);
      expect(res.status).toBe(200);
      return (res.body as { data: { run_id: string }[] }).data.map((r) => r.run_id).sort();
    };
    const all = [byAlice.body.run_id, byAccount.body.run_id].sort();
    expect(await listed((path) => api.json(path))).toEqual(all);
    expect(await listed((path) => api.json(path, { token: app.token }))).toEqual([byAccount.body.run_id]);

    const emails = { owner: `owner-${Date.now()}@example.test`, developer: `developer-${Date.now()}@example.test` };
    for (const [role, email] of Object.entries(emails)) {
      const invite = await api.json(`/v2/projects/${app.projectId}/invites`, { method: "POST", body: { email, role } });
      expect(invite.status).toBe(201);
    }
    // Invites are claimed at sign-in.
    const owner = await person(api, { email: emails.owner });
    const developer = await person(api, { email: emails.developer });
    expect(await listed(asPerson(api, owner))).toEqual(all);
    expect(await listed(asPerson(api, developer))).toEqual([]);

    const page = visitor(api);
    await signInAs(page, api, owner);
    const shown = text((await page.get(`/dashboard/projects/${app.projectId}/runs`)).html);
    expect(shown).toContain(byAlice.body.run_id);
    expect(shown).toContain(byAccount.body.run_id);
  });
});

describe("GET /v2/projects/{project_id}/async-runs/{run_id}: one run, for whoever lists it", () => {
  it("reads a run with its result to the operator, the project's owners and the caller that made it; anyone else gets a 404", async () => {
    const app = await seedRunnable(api);
    const other = await seedRunnable(api);
    const alice = await jwtOf(app.projectId, "alice");
    const started = await startAsync(api, app, { token: alice });
    await consume(api, started.message);
    const path = `/v2/projects/${app.projectId}/async-runs/${started.body.run_id}`;
    const read = await api.json(path);
    expect(read.status).toBe(200);
    // The status URL's resource, byte for byte.
    expect(read.body).toEqual((await poll(api, started.body.status_url, alice)).body);
    expect(read.body).toMatchObject({ status: "succeeded", mode: "async", handed_over_at: null });

    const email = `owner-${Date.now()}@example.test`;
    expect(
      (await api.json(`/v2/projects/${app.projectId}/invites`, { method: "POST", body: { email, role: "owner" } }))
        .status,
    ).toBe(201);
    const owner = await person(api, { email });
    expect((await asPerson(api, owner)(path)).status).toBe(200);

    for (const [name, target, token] of [
      ["a service account of the project that did not make it", path, app.token],
      ["another project's key", path, other.token],
      [
        "the run under another project",
        `/v2/projects/${other.projectId}/async-runs/${started.body.run_id}`,
        other.token,
      ],
      ["an unknown id", path.replace(started.body.run_id, `run_${"0".repeat(30)}`), undefined],
    ] as const) {
      const res = await api.json(target, { token });
      expect(res.status, name).toBe(404);
      expect(JSON.stringify(res.body), name).not.toContain('"result"');
    }
  });
});

describe("an async run's forwarded request does not outlive it", () => {
  const APP_KEY = "app-key-4f1d2c9b7e0a";
  const QUERY_SECRET = "query-secret-8c2e61";
  /** The run's row in its keeper (D1 keeps none). */
  const stored = async (run: KeptRunAddress) => {
    const rows = await keptSql(
      run,
      "SELECT status, error_code, request_headers, app_url, request_body FROM async_runs WHERE id = ?",
      run.run_id,
    );
    expect(rows).toHaveLength(1);
    return rows[0]!;
  };

  beforeEach(() => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    vi.spyOn(console, "log").mockImplementation(() => undefined);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("drops the forwarded headers and the query when the run ends: succeeded, failed, cancelled, interrupted or expired", async () => {
    const local = client();
    const app = await seedRunnable(local);
    const start = () => startAsync(local, app, { query: `token=${QUERY_SECRET}`, headers: { "X-Api-Key": APP_KEY } });
    const runs = {
      succeeded: await start(),
      failed: await start(),
      cancelled: await start(),
      interrupted: await start(),
      expired: await start(),
    };
    // While it waits, the run keeps what its app is to receive.
    const waiting = JSON.stringify(await stored(runs.succeeded.body));
    expect(waiting).toContain(APP_KEY);
    expect(waiting).toContain(QUERY_SECRET);

    await consume(local, runs.succeeded.message);
    await consume(local, runs.failed.message, {
      deps: { outbound: { fetch: async () => new Response("no", { status: 500 }) } },
    });
    expect(
      (await local.json(new URL(runs.cancelled.body.status_url).pathname, { method: "DELETE", token: app.token }))
        .status,
    ).toBe(200);
    await keptRows(runs.interrupted.body).claim(runs.interrupted.body.run_id, "msg-lost", local.clock.now());
    // Each keeper sweeps its own runs (as the cron swept D1's): every one of these runs' keepers.
    const sweep = async () => {
      for (const run of Object.values(runs)) await sweepKept(run.body, local.clock.now);
    };
    local.clock.advance(RUNNING_MAX_MS + 1_000);
    await sweep();
    local.clock.advance(QUEUED_MAX_MS);
    await sweep();

    for (const [ending, run] of Object.entries(runs)) {
      const row = await stored(run.body);
      expect(`${String(row.status)}/${String(row.error_code)}`, ending).toMatch(
        {
          succeeded: /^succeeded/,
          failed: /^failed\//,
          cancelled: /^cancelled/,
          interrupted: /^failed\/interrupted/,
          expired: /^failed\/expired/,
        }[ending]!,
      );
      expect(row.request_headers, ending).toBe("[]");
      expect(String(row.app_url), ending).not.toContain("?");
      expect(row.request_body, ending).toBeNull();
      expect(JSON.stringify(row), ending).not.toContain(APP_KEY);
      expect(JSON.stringify(row), ending).not.toContain(QUERY_SECRET);
    }
  });
});
