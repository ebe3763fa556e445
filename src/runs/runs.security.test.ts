import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { ADMIN, client, testDeps } from "../../test/helpers";
import { PEER, receiver } from "../../test/peers";
import { callWith, seedRunnable } from "../../test/runs";
import { TEST_SECRETS } from "../../test/secrets";
import { callApp } from "./call";

let upstreamCalls = 0;
const api = client({
  outbound: {
    fetch: (request) => {
      upstreamCalls++;
      return fetch(request);
    },
  },
});

const b64url = (value: unknown) => btoa(JSON.stringify(value)).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
const exp = () => Math.floor(api.clock.now().getTime() / 1000) + 600;

describe("run keys", () => {
  it("answers 401 with WWW-Authenticate: Bearer for a missing, malformed or unknown key", async () => {
    const app = await seedRunnable(api);
    const before = upstreamCalls;
    for (const headers of [{} as Record<string, string>, { Authorization: "Basic abc" }, { Authorization: "Bearer egsa_notarealtoken" }, { Authorization: "Bearer nonsense" }]) {
      const res = await api.json(app.runPath, { token: null, headers });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer realm=/);
    }
    expect(upstreamCalls).toBe(before);
  });

  it("refuses an expired service account token", async () => {
    const app = await seedRunnable(api);
    api.clock.advance(31 * 24 * 3600 * 1000);
    const res = await api.json(app.runPath, { token: app.token });
    expect(res.status).toBe(401);
    expect(String(res.body.detail)).toMatch(/expired/);
  });

  it("refuses JWTs that are unsigned, signed with another algorithm or key, expired, or lack project_id or exp", async () => {
    const app = await seedRunnable(api);
    const payload = { project_id: app.projectId, exp: exp() };
    const none = `${b64url({ alg: "none", typ: "JWT" })}.${b64url(payload)}.`;
    const tokens = [
      none,
      `${b64url({ alg: "none", typ: "JWT" })}.${b64url(payload)}.c2ln`,
      await sign(payload, TEST_SECRETS.JWT_SECRET, "HS512"),
      await sign(payload, "another-secret-0123456789abcdefghijklmnop", "HS256"),
      await sign({ ...payload, exp: Math.floor(api.clock.now().getTime() / 1000) - 1 }, TEST_SECRETS.JWT_SECRET, "HS256"),
      await sign({ exp: exp() }, TEST_SECRETS.JWT_SECRET, "HS256"),
      await sign({ project_id: app.projectId }, TEST_SECRETS.JWT_SECRET, "HS256"),
    ];
    const before = upstreamCalls;
    for (const token of tokens) {
      const res = await api.json(app.runPath, { token });
      expect(res.status, token).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/invalid_token/);
    }
    expect(upstreamCalls).toBe(before);
  });

  it("answers 404 to a token or JWT of another project, as if the app did not exist", async () => {
    const a = await seedRunnable(api);
    const b = await seedRunnable(api);
    const before = upstreamCalls;
    const jwtA = await sign({ project_id: a.projectId, exp: exp() }, TEST_SECRETS.JWT_SECRET, "HS256");
    for (const token of [a.token, jwtA]) {
      const res = await api.json(b.runPath, { method: "POST", token, body: {} });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe("not_found");
    }
    expect(upstreamCalls).toBe(before);
  });

  it("accepts the operator's admin token on any project", async () => {
    const app = await seedRunnable(api);
    expect((await api.json(app.runPath, { token: ADMIN })).status).toBe(200);
  });

  it("answers 404 for path segments that cannot be a project id or an app name", async () => {
    const app = await seedRunnable(api);
    expect((await api.json(`/v4/not-a-project/${app.appName}/run`, { token: app.token })).status).toBe(404);
    expect((await api.json(`/v4/${app.projectId}/Bad_Name/run`, { token: app.token })).status).toBe(404);
  });
});

describe("webhookEndpoint and X-Webhook-Secret are checked before the run", () => {
  const strict = { ALLOW_INSECURE_TARGETS: "false" };
  const refused = [
    "http://hooks.example.com/x",
    "https://user:pw@hooks.example.com/x",
    "https://localhost/x",
    "https://127.0.0.1/x",
    "https://0x7f.1/x",
    "https://2130706433/x",
    "https://10.1.2.3/x",
    "https://169.254.169.254/latest",
    "https://100.64.1.1/x",
    "https://[::1]/x",
    "https://[::ffff:192.168.0.1]/x",
    "https://[fe80::1]/x",
    "https://[fd00::1]/x",
    "https://224.0.0.1/x",
    "https://intranet/x",
    "relative/path",
  ];

  // One app serves the whole list; each case only reads.
  let shared: ReturnType<typeof seedRunnable> | undefined;

  it.each(refused)("refuses %s with 400 and does not run", async (endpoint) => {
    shared ??= seedRunnable(api);
    const app = await shared;
    const before = upstreamCalls;
    const res = await callWith(api, strict, `${app.runPath}?webhookEndpoint=${encodeURIComponent(endpoint)}`, { token: app.token });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: { field: string }[] };
    expect(body.errors[0]!.field).toBe("webhookEndpoint");
    expect(upstreamCalls).toBe(before);
  });

  it("refuses private addresses even when ALLOW_INSECURE_TARGETS allows http and loopback", async () => {
    const app = await seedRunnable(api);
    const res = await api.json(`${app.runPath}?webhookEndpoint=${encodeURIComponent("http://192.168.0.10/x")}`, { token: app.token });
    expect(res.status).toBe(400);
    const ok = await api.json(`${app.runPath}?webhookEndpoint=${encodeURIComponent(`${PEER}/hooks/dev`)}`, { token: app.token });
    expect(ok.status).toBe(200);
  });

  it("refuses an empty or oversized X-Webhook-Secret", async () => {
    const app = await seedRunnable(api);
    const hook = encodeURIComponent(`${PEER}/hooks/x`);
    for (const secret of ["", "x".repeat(1025)]) {
      const res = await api.json(`${app.runPath}?webhookEndpoint=${hook}`, { token: app.token, headers: { "X-Webhook-Secret": secret } });
      expect(res.status).toBe(400);
    }
  });
});

describe("origin_url of a succeeded build follows the same policy", () => {
  it("refuses http, loopback and private origins unless ALLOW_INSECURE_TARGETS (and private ones always)", async () => {
    const app = await seedRunnable(api);
    const build = await api.json<{ build_id: string }>(`/v2/projects/${app.projectId}/apps/${app.appId}/builds`, { method: "POST", token: app.token });
    const path = `/v2/projects/${app.projectId}/apps/${app.appId}/builds/${build.body.build_id}`;
    await api.json(path, { method: "PATCH", token: app.token, body: { status: "building" } });
    const report = (origin: string, overrides = {}) =>
      callWith(api, overrides, path, {
        method: "PATCH",
        token: app.token,
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ status: "succeeded", origin_url: origin }),
      });
    for (const origin of ["http://app.example.net", "https://127.0.0.1:9000", "https://localhost"]) {
      expect((await report(origin, { ALLOW_INSECURE_TARGETS: "false" })).status).toBe(400);
    }
    const metadata = await report("http://169.254.169.254/latest");
    expect(metadata.status).toBe(400);
    expect(((await metadata.json()) as { errors: { field: string }[] }).errors[0]!.field).toBe("origin_url");
    expect((await report("https://app.example.net", { ALLOW_INSECURE_TARGETS: "false" })).status).toBe(200);
  });
});

/** What the chunks of a body hold: the bytes they carry, and the buffers they keep alive. */
async function chunksOf(body: ReadableStream<Uint8Array>) {
  const reader = body.getReader();
  const held = { chunks: 0, bytes: 0, buffers: 0 };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return held;
    held.chunks++;
    held.bytes += value.byteLength;
    held.buffers += value.buffer.byteLength;
  }
}

describe("memory: an answer of many small chunks", () => {
  // Each chunk of an app's answer was a view of its own 256 KiB read buffer, handed on in a byte stream
  // that workerd re-chunks into 4 KiB buffers of its own for a JavaScript reader: a cortex JSON answer
  // sent in 120 small flushes (1,930 bytes) held up to 30 MiB while the envelope collected it, each
  // chunk of a pass-through held its buffer while it waited for a slow caller or a copy, and ~500
  // flushes exhausted an isolate. What reaches the caller, the copy and the envelope must hold only the
  // bytes that arrived: the sum of the buffers behind the chunks is the body's length.
  const get = (path: string, token: string, ctx = createExecutionContext()) =>
    api.worker.fetch(new Request(`http://localhost${path}`, { headers: { Authorization: `Bearer ${token}` } }), env, ctx);

  it("a 120-flush event stream reaches the caller in chunks that hold only its bytes", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const held = await chunksOf((await get(`${app.appPath}/s?events=120&gap=1`, app.token)).body!);
    expect(held.bytes).toBe(1930);
    expect(held.chunks).toBeGreaterThan(10);
    expect(held.buffers).toBe(held.bytes);
  });

  it("a 120-flush event stream with a webhook (the copy path) reaches the caller in chunks that hold only its bytes", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const hook = await receiver([{ status: 200 }]);
    const ctx = createExecutionContext();
    const held = await chunksOf((await get(`${app.appPath}/s?events=120&gap=1&webhookEndpoint=${encodeURIComponent(hook.url)}`, app.token, ctx)).body!);
    await waitOnExecutionContext(ctx);
    expect(held.bytes).toBe(1930);
    expect(held.chunks).toBeGreaterThan(10);
    expect(held.buffers).toBe(held.bytes);
  });

  it("a 120-flush answer is handed to the envelope's read in chunks that hold only its bytes", async () => {
    // The envelope collects the call's body (`AppCall.text`, when no length is declared) from this stream.
    const limits = { headersMs: 5_000, idleMs: 5_000 };
    const call = await callApp(testDeps(), { target: `${PEER}/upstream/s?events=120&gap=1`, method: "GET", headers: new Headers(), body: null, runId: "run_memory" }, limits);
    const held = await chunksOf(call.stream()!);
    expect(held.bytes).toBe(1930);
    expect(held.buffers).toBe(held.bytes);
  });
});
