import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client, seedProject } from "../../test/helpers";
import { DOWN, PEER } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import { pathTarget } from "./path";

const api = client();
const PROJECT = "proj_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c";

/** A request whose `url` is exactly `raw`, as a zone without URL normalisation hands it over. */
function rawRequest(raw: string, init: RequestInit): Request {
  const request = new Request("http://placeholder/", init);
  Object.defineProperty(request, "url", { value: raw });
  return request;
}

/** The same request sent twice: its URL in normal form, then in a raw form that means the same URL. */
async function both(path: string, init: RequestInit & { host?: string } = {}) {
  const host = init.host ?? "localhost";
  const [pathname, query] = path.split("?") as [string, string | undefined];
  const segments = pathname.split("/");
  // `/v4/./{project}/x/../{app}/…` on an upper-case host: the URL parser reads it as the normal form.
  const raw = `http://${host.toUpperCase()}${[...segments.slice(0, 2), ".", segments[2], "x", "..", ...segments.slice(3)].join("/")}${query === undefined ? "" : `?${query}`}`;
  const answers = [];
  for (const request of [new Request(`http://${host}${path}`, init), rawRequest(raw, init)]) {
    const ctx = createExecutionContext();
    const response = await api.worker.fetch(request, env, ctx);
    await waitOnExecutionContext(ctx);
    answers.push(response);
  }
  return answers as [Response, Response];
}

/** What a caller can tell apart: status, the headers we set, and the body with its fresh ids and times blanked. */
async function observable(response: Response) {
  const text = await response.text();
  const headers = ["content-type", "cache-control", "www-authenticate", "allow", "retry-after"].map((name) => [
    name,
    response.headers.get(name),
  ]);
  return {
    status: response.status,
    headers,
    hasRequestId: /^req_/.test(response.headers.get("x-request-id") ?? ""),
    hasRunId: response.headers.has("x-run-id"),
    body: text
      .replace(/(req|run)_[0-9a-z]{30}/g, "$1_…")
      .replace(/"run_time_ms":\d+/g, '"run_time_ms":…')
      .replace(/"timestamp":"[^"]+"/g, '"timestamp":…'),
  };
}

describe("one entry: a run URL in raw form is the run of its normal form", () => {
  it("takes exactly the paths under an app as runs, and leaves the reserved runs/{run_id} to the router", () => {
    const run = (path: string) => {
      const target = pathTarget(new URL(path, "http://localhost").pathname);
      return target === null ? "router" : target.reserved ? "async run" : "run";
    };
    for (const path of [
      `/v4/${PROJECT}/hello/run`,
      `/v4/${PROJECT}/llm/v1/chat/completions`,
      `/v4/${PROJECT}/hello/run/`,
      `/v4/${PROJECT}/hello/runs`,
      `/v4/${PROJECT}/hello/runs/a/b`,
    ]) {
      expect(run(path), path).toBe("run");
    }
    // Malformed ids are runs too: the run answers them 404, saying which part names nothing.
    expect(run(`/v4/proj_short/hello/run`)).toBe("run");
    expect(run(`/v4/${PROJECT}/hello/runs/run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c`)).toBe("async run");
    expect(run(`/v4/${PROJECT}/hello/runs/x/`)).toBe("async run");
    expect(run(`/v4/${PROJECT}/hello`)).toBe("router");
    expect(run(`/v2/projects`)).toBe("router");
  });

  it("answers every kind of run request alike, whether its URL came in normal form or not", async () => {
    const app = await seedRunnable(api);
    const idle = await seedProject(api, { appName: "idle" });
    const down = await seedRunnable(api, DOWN);
    const custom = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const auth = { Authorization: `Bearer ${app.token}` };
    const customAuth = { Authorization: `Bearer ${custom.token}` };
    const cases: [string, RequestInit & { host?: string }][] = [
      [
        `${app.runPath}?temperature=0.2&tag=a&tag=b`,
        {
          method: "POST",
          headers: { ...auth, "Content-Type": "application/json", "X-Custom": "kept" },
          body: '{"a":1}',
        },
      ],
      [`${app.runPath}?webhookEndpoint=${encodeURIComponent(`${PEER}/hooks/none`)}`, { headers: auth }],
      [`${app.runPath}?status=418`, { headers: auth }],
      [app.runPath, {}],
      [app.runPath, { headers: { Authorization: "Basic abc" } }],
      [app.runPath, { headers: { Authorization: "Bearer egsa_nope" } }],
      [`/v4/${PROJECT}/hello/run`, { headers: auth }],
      [`/v4/${app.projectId}/nope/run`, { headers: auth }],
      [`/v4/${idle.projectId}/idle/run`, { headers: { Authorization: `Bearer ${idle.token}` } }],
      [down.runPath, { headers: { Authorization: `Bearer ${down.token}` } }],
      [app.runPath, { method: "POST", headers: { ...auth, "Content-Type": "text/plain" }, body: "hi" }],
      [app.runPath, { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: "{oops" }],
      [app.runPath, { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: "[1]" }],
      [
        app.runPath,
        {
          method: "POST",
          headers: { ...auth, "Content-Type": "application/json", "Content-Length": "99999999" },
          body: "{}",
        },
      ],
      [`${app.runPath}?webhookEndpoint=not-a-url`, { headers: auth }],
      [
        `${app.runPath}?webhookEndpoint=${encodeURIComponent(`${PEER}/h`)}`,
        { headers: { ...auth, "X-Webhook-Secret": "" } },
      ],
      [app.runPath, { headers: auth, host: "unknown.example.test" }],
      // Async runs: accepted alike (the message goes to the real local queue), refused alike.
      [
        `${app.runPath}?async=true`,
        { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: '{"a":1}' },
      ],
      [`${app.runPath}?async=maybe`, { headers: auth }],
      [`/v4/${idle.projectId}/idle/run?async=true`, { headers: { Authorization: `Bearer ${idle.token}` } }],
      // Any path: a cortex app's other functions, its methods refused; a custom app's routes, methods and bodies passed through.
      [
        `${app.appPath}/predict/v2?x=1`,
        { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: "{}" },
      ],
      [`${app.appPath}/run`, { method: "PUT", headers: auth }],
      [`${app.appPath}/run`, { method: "DELETE", headers: auth }],
      [
        `${custom.appPath}/v1/chat/completions?async=false`,
        { method: "POST", headers: { ...customAuth, "Content-Type": "text/plain" }, body: "hi" },
      ],
      [`${custom.appPath}/items/7?png=64`, { method: "GET", headers: customAuth }],
      [
        `${custom.appPath}/items/7?raw=1`,
        {
          method: "PUT",
          headers: { ...customAuth, "Content-Type": "application/octet-stream" },
          body: new Uint8Array([0, 1, 2, 255]),
        },
      ],
      [`${custom.appPath}/items/7`, { method: "PATCH", headers: customAuth }],
      [`${custom.appPath}/items/7?status=429&retryAfter=7`, { method: "DELETE", headers: customAuth }],
      [`${custom.appPath}/items/7`, { headers: customAuth, host: "unknown.example.test" }],
    ];
    for (const [path, init] of cases) {
      const [normal, raw] = await both(path, init);
      const seen = await observable(normal);
      expect(seen, `${init.method ?? "GET"} ${path}`).toEqual(await observable(raw));
      expect(seen.hasRequestId).toBe(true);
    }
  });

  it("refuses a repeated webhookEndpoint instead of choosing one", async () => {
    const app = await seedRunnable(api);
    const hook = encodeURIComponent(`${PEER}/hooks/twice`);
    const { status, body } = await api.json<{ errors: unknown[] }>(
      `${app.runPath}?webhookEndpoint=${hook}&webhookEndpoint=${hook}`,
      { token: app.token },
    );
    expect(status).toBe(400);
    expect(body.errors).toEqual([{ location: "query", field: "webhookEndpoint", message: "must be given once" }]);
  });

  it("renders an unexpected failure as a 500 problem with the request id, never a stack", async () => {
    // A token this isolate has not seen yet, so the run must read D1, which this environment lacks.
    const app = await seedRunnable(api);
    const ctx = createExecutionContext();
    const request = new Request(`http://localhost${app.runPath}`, {
      headers: { Authorization: `Bearer ${app.token}` },
    });
    const response = await api.worker.fetch(request, { ...env, DB: undefined as never }, ctx);
    await waitOnExecutionContext(ctx);
    const text = await response.text();
    expect(response.status).toBe(500);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(text).not.toMatch(/at .*\.ts:\d+/);
    expect(JSON.parse(text).request_id).toBe(response.headers.get("x-request-id"));
  });
});
