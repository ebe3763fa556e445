import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { DOWN, type Echo, PEER } from "../../test/peers";
import { callWith, countingRoundTrips, deploy, seedRunnable } from "../../test/runs";
import { TEST_SECRETS } from "../../test/secrets";
import { TOKEN_CACHE_TTL_MS as RUN_CACHE_TTL_MS } from "../auth/lookup";

const api = client();

interface Envelope<T = Echo> {
  run_id: string;
  result: T;
  run_time_ms: number;
  timestamp: string;
}

const jwtFor = (projectId: string, claims: Record<string, unknown> = {}) =>
  sign(
    { project_id: projectId, exp: Math.floor(api.clock.now().getTime() / 1000) + 600, ...claims },
    TEST_SECRETS.JWT_SECRET,
    "HS256",
  );

describe("run proxy (POST|GET /v4/{project_id}/{app_name}/run)", () => {
  it("runs with a service account token: the envelope, X-Run-Id, the body and query passed through unchanged", async () => {
    const app = await seedRunnable(api);
    const raw = '{"inputs":{"prompt":"hi","n":1.50}}';
    const { status, body, headers } = await api.json<Envelope>(`${app.runPath}?temperature=0.2&tag=a&tag=b`, {
      method: "POST",
      token: app.token,
      rawBody: raw,
      headers: { "Content-Type": "application/json", "X-Webhook-Secret": "never-forwarded", "X-Custom": "kept" },
    });
    expect(status).toBe(200);
    expect(Object.keys(body)).toEqual(["run_id", "result", "run_time_ms", "timestamp"]);
    expect(body.run_id).toMatch(/^run_/);
    expect(headers.get("x-run-id")).toBe(body.run_id);
    expect(body.timestamp).toBe(api.clock.now().toISOString());
    expect(body.run_time_ms).toBeGreaterThanOrEqual(0);
    expect(body.result.method).toBe("POST");
    expect(body.result.body).toBe(raw);
    expect(body.result.query).toEqual([
      ["temperature", "0.2"],
      ["tag", "a"],
      ["tag", "b"],
    ]);
    expect(body.result.headers["x-run-id"]).toBe(body.run_id);
    expect(body.result.headers["x-custom"]).toBe("kept");
    expect(body.result.headers.authorization).toBeUndefined();
    expect(body.result.headers["x-webhook-secret"]).toBeUndefined();
  });

  it("passes a flat argument object through too", async () => {
    const app = await seedRunnable(api);
    const { body } = await api.json<Envelope>(app.runPath, {
      method: "POST",
      token: app.token,
      body: { prompt: "x", steps: 3 },
    });
    expect(JSON.parse(body.result.body!)).toEqual({ prompt: "x", steps: 3 });
  });

  it("runs with GET and no body; webhookEndpoint is not passed to the app", async () => {
    const app = await seedRunnable(api);
    const hook = encodeURIComponent(`${PEER}/hooks/ignored`);
    const { status, body } = await api.json<Envelope>(`${app.runPath}?a=1&webhookEndpoint=${hook}`, {
      token: app.token,
    });
    expect(status).toBe(200);
    expect(body.result.method).toBe("GET");
    expect(body.result.body).toBeNull();
    expect(body.result.query).toEqual([["a", "1"]]);
  });

  it("runs with an HS256 JWT of the project (sub optional)", async () => {
    const app = await seedRunnable(api);
    for (const token of [await jwtFor(app.projectId), await jwtFor(app.projectId, { sub: "user-42" })]) {
      const { status, body } = await api.json<Envelope>(app.runPath, { method: "POST", token, body: { inputs: {} } });
      expect(status).toBe(200);
      expect(body.result.headers.authorization).toBeUndefined();
    }
  });

  it("keeps the upstream's own status, with the envelope (204 becomes 200: the envelope is a body)", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?status=422`);
    const { status, body } = await api.json<Envelope>(app.runPath, { method: "POST", token: app.token, body: {} });
    expect(status).toBe(422);
    expect(body.result.method).toBe("POST");
    const empty = await seedRunnable(api, `${PEER}/upstream/echo?empty=1&status=204`);
    const answer = await api.json<Envelope<null>>(empty.runPath, { token: empty.token });
    expect(answer.status).toBe(200);
    expect(answer.body.result).toBeNull();
  });

  it("answers 409 no_deployment when the app has no succeeded build, 404 for an unknown app", async () => {
    const app = await seedRunnable(api);
    const other = await api.json(`/v2/projects/${app.projectId}/apps`, {
      method: "POST",
      token: app.token,
      body: { name: "undeployed", region: "us-east-1", runtime: "custom" },
    });
    expect(other.status).toBe(201);
    const none = await api.json(`/v4/${app.projectId}/undeployed/run`, { method: "POST", token: app.token, body: {} });
    expect(none.status).toBe(409);
    expect(none.body.code).toBe("no_deployment");
    const unknown = await api.json(`/v4/${app.projectId}/nope/run`, { method: "POST", token: app.token, body: {} });
    expect(unknown.status).toBe(404);
  });

  it("answers 502 with run_id when the upstream is down or answers JSON that is not", async () => {
    const down = await seedRunnable(api, `${DOWN}/run`);
    const res = await api.json(down.runPath, { method: "POST", token: down.token, body: {} });
    expect(res.status).toBe(502);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(res.body.code).toBe("bad_gateway");
    expect(res.body.run_id).toMatch(/^run_/);
    expect(res.headers.get("x-run-id")).toBe(res.body.run_id);
    const text = await seedRunnable(api, `${PEER}/upstream/echo?text=1&type=application/json`);
    const notJson = await api.json(text.runPath, { token: text.token });
    expect(notJson.status).toBe(502);
  });

  it("answers 504 with run_id when the upstream is slower than RUN_TIMEOUT_MS", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?delay=1500`);
    const started = Date.now();
    const res = await callWith(api, { RUN_TIMEOUT_MS: "200" }, app.runPath, { token: app.token });
    expect(res.status).toBe(504);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.code).toBe("gateway_timeout");
    expect(body.run_id).toBe(res.headers.get("x-run-id"));
    expect(Date.now() - started).toBeLessThan(1200);
  });

  it("answers 413 before reading a body above the limit, 415 for non-JSON, 400 for malformed JSON or a non-object", async () => {
    const app = await seedRunnable(api);
    const big = await callWith(api, {}, app.runPath, {
      method: "POST",
      token: app.token,
      headers: { "Content-Type": "application/json", "Content-Length": String(7 * 1024 * 1024) },
      body: "{}",
    });
    expect(big.status).toBe(413);
    const streamed = await api.json(app.runPath, {
      method: "POST",
      token: app.token,
      rawBody: `{"x":"${"a".repeat(6 * 1024 * 1024)}"}`,
      headers: { "Content-Type": "application/json" },
    });
    expect(streamed.status).toBe(413);
    const text = await api.json(app.runPath, {
      method: "POST",
      token: app.token,
      rawBody: "hello",
      headers: { "Content-Type": "text/plain" },
    });
    expect(text.status).toBe(415);
    const malformed = await api.json(app.runPath, {
      method: "POST",
      token: app.token,
      rawBody: "{",
      headers: { "Content-Type": "application/json" },
    });
    expect(malformed.body.code).toBe("malformed_json");
    const array = await api.json(app.runPath, { method: "POST", token: app.token, body: [1] });
    expect(array.status).toBe(400);
  });

  it("answers 502 when the upstream's answer exceeds the response limit", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?bytes=${11 * 1024 * 1024}`);
    const res = await api.json(app.runPath, { token: app.token });
    expect(res.status).toBe(502);
    expect(String(res.body.detail)).toMatch(/larger than/);
  });

  it("passes a WebSocket upgrade through to the upstream, without the caller's Authorization", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/ws`);
    const hook = encodeURIComponent("not even a url");
    const res = await api.call(`${app.runPath}?webhookEndpoint=${hook}`, {
      token: app.token,
      headers: { Upgrade: "websocket" },
    });
    expect(res.status).toBe(101);
    const ws = res.webSocket!;
    ws.accept();
    const reply = new Promise<string>((resolve) =>
      ws.addEventListener("message", (event) => resolve(String(event.data))),
    );
    ws.send("ping");
    const echoed = JSON.parse(await reply) as { echo: string; run_id: string; authorization: string };
    expect(echoed.echo).toBe("ping");
    expect(echoed.run_id).toBe(res.headers.get("x-run-id"));
    expect(echoed.authorization).toBe("");
    ws.close();
  });
});

describe("run proxy hot path", () => {
  it("makes no D1 query before calling the upstream once the token and deployment are cached", async () => {
    const d1 = countingRoundTrips(env.DB);
    let atUpstream = -1;
    const counted = client({
      outbound: {
        fetch: (request) => {
          atUpstream = d1.trips();
          return fetch(request);
        },
      },
    });
    const app = await seedRunnable(counted);
    const jwt = await sign(
      { project_id: app.projectId, exp: Math.floor(counted.clock.now().getTime() / 1000) + 600 },
      TEST_SECRETS.JWT_SECRET,
      "HS256",
    );
    for (const token of [app.token, jwt]) {
      const cold = d1.trips();
      expect((await callWith(counted, { DB: d1.db }, app.runPath, { token })).status).toBe(200);
      expect(atUpstream - cold).toBeGreaterThan(0);
      const warm = d1.trips();
      expect((await callWith(counted, { DB: d1.db }, app.runPath, { token })).status).toBe(200);
      expect(atUpstream - warm).toBe(0);
      // And nothing after it either, within the minute last_used_at is written at most once in.
      expect(d1.trips() - warm).toBe(0);
      counted.clock.advance(RUN_CACHE_TTL_MS + 1);
    }
  });

  it("sees a revocation made elsewhere within 30 s, and at once when revoked through this isolate", async () => {
    const app = await seedRunnable(api);
    expect((await api.call(app.runPath, { token: app.token })).status).toBe(200);
    // Revoked by another isolate: this one still has the token cached.
    await env.DB.prepare("UPDATE service_accounts SET revoked_at = ?1 WHERE id = ?2")
      .bind(api.clock.now().getTime(), app.serviceAccountId)
      .run();
    expect((await api.call(app.runPath, { token: app.token })).status).toBe(200);
    // The promise is a number (SECURITY.md: within 30 s), not the constant: raising the constant fails here.
    api.clock.advance(30_000);
    const revoked = await api.json(app.runPath, { token: app.token });
    expect(revoked.status).toBe(401);
    expect(revoked.headers.get("www-authenticate")).toMatch(/^Bearer/);

    const other = await seedRunnable(api);
    expect((await api.call(other.runPath, { token: other.token })).status).toBe(200);
    await api.json(`/v2/projects/${other.projectId}/service-accounts/${other.serviceAccountId}`, { method: "DELETE" });
    expect((await api.call(other.runPath, { token: other.token })).status).toBe(401);
  });

  it("routes to a new deployment at once in this isolate", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?v=1`);
    const first = await api.json<Envelope>(app.runPath, { token: app.token });
    expect(first.body.result.query).toEqual([["v", "1"]]);
    api.clock.advance(1_000);
    await deploy(api, app, `${PEER}/upstream/echo?v=2`);
    const second = await api.json<Envelope>(app.runPath, { token: app.token });
    expect(second.body.result.query).toEqual([["v", "2"]]);
  });
});
