import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { ADMIN, client, testDeps } from "../../test/helpers";
import { PEER, received, receiver } from "../../test/peers";
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

const b64url = (value: unknown) =>
  btoa(JSON.stringify(value)).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
const exp = () => Math.floor(api.clock.now().getTime() / 1000) + 600;

describe("run keys", () => {
  it("answers 401 with WWW-Authenticate: Bearer for a missing, malformed or unknown key", async () => {
    const app = await seedRunnable(api);
    const before = upstreamCalls;
    for (const headers of [
      {} as Record<string, string>,
      { Authorization: "Basic abc" },
      { Authorization: "Bearer egsa_notarealtoken" },
      { Authorization: "Bearer nonsense" },
    ]) {
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
      await sign(
        { ...payload, exp: Math.floor(api.clock.now().getTime() / 1000) - 1 },
        TEST_SECRETS.JWT_SECRET,
        "HS256",
      ),
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
    const res = await callWith(api, strict, `${app.runPath}?webhookEndpoint=${encodeURIComponent(endpoint)}`, {
      token: app.token,
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: { field: string }[] };
    expect(body.errors[0]!.field).toBe("webhookEndpoint");
    expect(upstreamCalls).toBe(before);
  });

  it("refuses private addresses even when ALLOW_INSECURE_TARGETS allows http and loopback", async () => {
    const app = await seedRunnable(api);
    const res = await api.json(`${app.runPath}?webhookEndpoint=${encodeURIComponent("http://192.168.0.10/x")}`, {
      token: app.token,
    });
    expect(res.status).toBe(400);
    const ok = await api.json(`${app.runPath}?webhookEndpoint=${encodeURIComponent(`${PEER}/hooks/dev`)}`, {
      token: app.token,
    });
    expect(ok.status).toBe(200);
  });

  it("refuses an empty or oversized X-Webhook-Secret", async () => {
    const app = await seedRunnable(api);
    const hook = encodeURIComponent(`${PEER}/hooks/x`);
    for (const secret of ["", "x".repeat(1025)]) {
      const res = await api.json(`${app.runPath}?webhookEndpoint=${hook}`, {
        token: app.token,
        headers: { "X-Webhook-Secret": secret },
      });
      expect(res.status).toBe(400);
    }
  });
});

describe("origin_url of a succeeded build follows the same policy", () => {
  it("refuses http, loopback and private origins unless ALLOW_INSECURE_TARGETS (and private ones always)", async () => {
    const app = await seedRunnable(api);
    const build = await api.json<{ build_id: string }>(`/v2/projects/${app.projectId}/apps/${app.appId}/builds`, {
      method: "POST",
      token: app.token,
    });
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

describe("memory: an answer of many small chunks", () => {
  // Each chunk of an app's answer was once a view of its own 256 KiB read buffer, queued in a JavaScript
  // stream: a cortex JSON answer sent in 120 small flushes (1,930 bytes) held up to 30 MiB while the
  // envelope collected it, and ~500 flushes exhausted an isolate; later each read allocated a buffer of
  // its own, garbage that V8 collects only after ~64 MiB of it. Now the app's body is read into one
  // buffer per stream, reused read after read (`relay` in call.ts): a chunk is lent to whoever takes it
  // (the runtime's pipe to the caller, the copy, the envelope's read), each of which copies what it
  // keeps, and the next read waits until the chunk was taken.
  const get = (path: string, token: string, ctx = createExecutionContext()) =>
    api.worker.fetch(
      new Request(`http://localhost${path}`, { headers: { Authorization: `Bearer ${token}` } }),
      env,
      ctx,
    );
  const limits = { headersMs: 5_000, idleMs: 5_000 };
  const callPeer = (query: string) =>
    callApp(
      testDeps(),
      { url: `${PEER}/upstream/s?${query}`, method: "GET", headers: new Headers(), body: null, runId: "run_memory" },
      limits,
    );

  it("a 120-flush event stream is read into one 16 KiB buffer, each chunk lent, and reaches the caller whole", async () => {
    const call = await callPeer("events=120&gap=1");
    const buffers = new Set<number>();
    let bytes = 0;
    let text = "";
    await call.relay((chunk) => {
      buffers.add(chunk.buffer.byteLength);
      bytes += chunk.byteLength;
      text += new TextDecoder().decode(chunk);
    });
    // A trickle never grows the read: one buffer of the first read's size from start to end.
    expect([...buffers]).toEqual([16 * 1024]);
    expect(bytes).toBe(1930);
    expect(text.match(/data:/g)).toHaveLength(120);
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    expect(await (await get(`${app.appPath}/s?events=120&gap=1`, app.token)).text()).toBe(text);
  });

  it("a caller who reads slowly makes the gateway read no further ahead than one read: nothing piles up", async () => {
    // 4 MB written at once, as fast as the connection takes it.
    const call = await callPeer("png=4000000");
    const reader = call.stream()!.getReader();
    const first = await reader.read();
    await new Promise((resolve) => setTimeout(resolve, 200));
    // What the gateway has read of the app: what the caller took, plus at most one read not yet taken.
    expect(call.tally.bytes).toBeLessThanOrEqual(first.value!.byteLength + 256 * 1024);
    const whole = new Uint8Array(4_000_000);
    whole.set(first.value!);
    let rest = first.value!.byteLength;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      whole.set(value, rest);
      rest += value.byteLength;
    }
    expect(await call.tally.ended).toBe("done");
    expect(call.tally.bytes).toBe(rest);
    expect(rest).toBe(4_000_000);
    // Read after read into one buffer, and still every byte as the app sent it.
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", whole));
    expect(Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("")).toBe(
      call.response.headers.get("x-image-sha256"),
    );
  });

  it("a 120-flush event stream with a webhook (the copy path) reaches the caller and the copy whole", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const hook = await receiver([{ status: 200 }]);
    const ctx = createExecutionContext();
    const res = await get(
      `${app.appPath}/s?events=120&gap=1&webhookEndpoint=${encodeURIComponent(hook.url)}`,
      app.token,
      ctx,
    );
    const text = await res.text();
    await waitOnExecutionContext(ctx);
    expect(text.match(/data:/g)).toHaveLength(120);
    for (let i = 0; i < 200 && (await received(hook.key)).length === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    const [delivery] = await received(hook.key);
    expect((JSON.parse(delivery!.body!) as { text: string }).text).toBe(text);
  });

  it("a 120-flush answer read whole for the envelope keeps exactly its bytes", async () => {
    const call = await callPeer("events=120&gap=1");
    const text = await call.text(1_000_000);
    expect(text?.length).toBe(1930);
    expect(text?.match(/data:/g)).toHaveLength(120);
  });
});

describe("a WebSocket run", () => {
  // The handshake's timeout stayed armed once the socket was open: every WebSocket, however busy, was
  // cut at RUN_TIMEOUT_MS (120 s). Here the timeout is 200 ms and the socket is used at 2.5 times that.
  it("lives past the run timeout, as long as both sides keep it open", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/ws`);
    const res = await callWith(api, { RUN_TIMEOUT_MS: "200" }, app.runPath, {
      token: app.token,
      headers: { Upgrade: "websocket" },
    });
    expect(res.status).toBe(101);
    const ws = res.webSocket!;
    ws.accept();
    let closed = false;
    ws.addEventListener("close", () => (closed = true));
    ws.addEventListener("error", () => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const reply = new Promise<string>((resolve) =>
      ws.addEventListener("message", (event) => resolve(String(event.data))),
    );
    ws.send("still here");
    const echoed = await Promise.race([
      reply,
      new Promise<string>((resolve) => setTimeout(() => resolve("no answer"), 2_000)),
    ]);
    expect(closed).toBe(false);
    expect(echoed).toContain("still here");
    ws.close();
  });
});

describe("headers between a caller and an app", () => {
  it("an app's headers cannot act on the gateway's hostname: cookies, transport, reports, CORS, caches and storage are not passed back; nosniff and a sandbox are added", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const hostile = [
      "Set-Cookie: session=stolen; Path=/",
      "Strict-Transport-Security: max-age=0",
      'Alt-Svc: h3=":443"',
      'Clear-Site-Data: "*"',
      'NEL: {"report_to":"app","max_age":31536000}',
      'Report-To: {"group":"app","endpoints":[{"url":"https://app.example/r"}]}',
      'Reporting-Endpoints: app="https://app.example/r"',
      "Service-Worker-Allowed: /",
      "Access-Control-Allow-Origin: https://evil.example",
      "Access-Control-Allow-Credentials: true",
      "Access-Control-Allow-Headers: Authorization",
      "Timing-Allow-Origin: *",
      "Accept-CH: Sec-CH-UA-Full-Version-List",
      "Refresh: 0; url=https://evil.example/",
      "CDN-Cache-Control: max-age=86400",
      "Cache-Control: public, s-maxage=86400, max-age=60",
      "X-Content-Type-Options: sniff-away",
      "Content-Security-Policy: script-src *",
      "Connection: X-Hop",
      "X-Hop: only for this connection",
      "X-App-Header: kept",
    ];
    const query = hostile.map((line) => `h=${encodeURIComponent(line)}`).join("&");
    const res = await api.call(`${app.appPath}/page?${query}`, { token: app.token });
    expect(res.status).toBe(200);
    for (const name of [
      "set-cookie",
      "strict-transport-security",
      "alt-svc",
      "clear-site-data",
      "nel",
      "report-to",
      "reporting-endpoints",
      "service-worker-allowed",
      "access-control-allow-origin",
      "access-control-allow-credentials",
      "access-control-allow-headers",
      "timing-allow-origin",
      "accept-ch",
      "refresh",
      "cdn-cache-control",
      "x-hop",
    ]) {
      expect(res.headers.get(name), name).toBeNull();
    }
    expect(res.headers.get("cache-control")).toBe("private, max-age=60");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("content-security-policy")).toBe("script-src *, sandbox");
    expect(res.headers.get("content-type")).toBe("text/html");
    expect(res.headers.get("x-app-header")).toBe("kept");
    await res.body?.cancel();
  });

  it("a caller cannot tell the app where the request came from: X-Forwarded-*, Forwarded, X-Real-IP and what Connection names are the gateway's or dropped", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const res = await api.json<{ headers: Record<string, string> }>(`${app.appPath}/echo`, {
      token: app.token,
      host: "localhost:8787",
      headers: {
        "CF-Connecting-IP": "203.0.113.7",
        "X-Forwarded-For": "10.0.0.1, 127.0.0.1",
        Forwarded: "for=127.0.0.1;host=admin.internal;proto=https",
        "X-Real-IP": "127.0.0.1",
        "True-Client-IP": "127.0.0.1",
        "X-Forwarded-Host": "admin.internal",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Port": "443",
        Connection: "X-Internal-Auth",
        "X-Internal-Auth": "let-me-in",
        "X-App-Input": "kept",
      },
    });
    expect(res.status).toBe(200);
    const seen = res.body.headers;
    expect(seen["x-forwarded-for"]).toBe("203.0.113.7");
    expect(seen["x-forwarded-host"]).toBe("localhost:8787");
    expect(seen["x-forwarded-proto"]).toBe("http");
    for (const name of [
      "forwarded",
      "x-real-ip",
      "true-client-ip",
      "x-forwarded-port",
      "x-internal-auth",
      "cf-connecting-ip",
    ])
      expect(seen[name], name).toBeUndefined();
    expect(seen["x-app-input"]).toBe("kept");
  });
});
