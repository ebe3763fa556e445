import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { world } from "../../test/cron-world";
import { addDomain, uniqueLabel, validate } from "../../test/domains";
import { PEER } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import { pathTarget } from "./path";

// Every URL the gateway sends an app, whatever the test.
const called: string[] = [];
const w = world({
  outbound: {
    fetch: (request) => {
      called.push(request.url);
      return fetch(request);
    },
  },
});

/**
 * A request whose `url` is exactly `raw`, as a zone without URL normalisation hands it over: the
 * runtime's own Request would parse it (resolving the dot segments) and hide the attack.
 */
function rawRequest(raw: string, init: RequestInit = {}): Request {
  const request = new Request("http://placeholder/", init);
  Object.defineProperty(request, "url", { value: raw });
  return request;
}

async function send(request: Request) {
  const ctx = createExecutionContext();
  const response = await w.api.worker.fetch(request, env, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}

/** An app deployed below a base path, `{PEER}/upstream/echo`: what must never be left is `/upstream/echo/`. */
const BASE = `${PEER}/upstream/echo/`;
const outsideTheBase = () => called.filter((url) => !url.startsWith(BASE));

describe("a run's path cannot climb out of its app", () => {
  it("a backslash dot segment (`..\\..\\admin`) does not reach above the deployment's base path", async () => {
    const app = await seedRunnable(w.api);
    expect(rawRequest(`http://localhost${app.appPath}/..\\..\\admin`).url).toContain("\\");
    const response = await send(
      rawRequest(`http://localhost${app.appPath}/x/..\\..\\..\\admin`, {
        headers: { Authorization: `Bearer ${app.token}` },
      }),
    );
    await response.text();
    expect(response.status).toBe(404);
    // Within the app, the same backslashes are the app's own path, resolved before the app sees it.
    const inside = await send(
      rawRequest(`http://localhost${app.appPath}/a/b\\..\\run`, { headers: { Authorization: `Bearer ${app.token}` } }),
    );
    expect(inside.status).toBe(200);
    expect(called.at(-1)).toBe(`${BASE}a/run`);
    expect(outsideTheBase()).toEqual([]);
  });

  it("a tab or newline inside a dot segment (`.<tab>.`, which the URL parser strips) does not reach above the base path", async () => {
    const app = await seedRunnable(w.api);
    for (const raw of [
      `${app.appPath}/.\t./.\t./admin`,
      `${app.appPath}/.\n./.\n./admin`,
      `${app.appPath}/%2e%2E/%2E./admin`,
    ]) {
      const response = await send(
        rawRequest(`http://localhost${raw}`, { headers: { Authorization: `Bearer ${app.token}` } }),
      );
      await response.text();
      expect(response.status, JSON.stringify(raw)).toBe(404);
    }
    expect(outsideTheBase()).toEqual([]);
  });

  it("`%2e%2e` segments on project B's domain do not run project A's app under B's hostname", async () => {
    const a = await seedRunnable(w.api);
    const b = await seedRunnable(w.api);
    const host = `${uniqueLabel("dots")}.example.test`;
    w.dns.set(host, "ok");
    await addDomain(w.api, b, host);
    expect((await validate(w.api, b, host)).body.status).toBe("validated");
    const before = called.length;
    for (const dots of ["%2e%2e", "%2E%2E", ".%2e", "..\\x\\..\\.."]) {
      const climb = dots.includes("\\") ? dots : `${dots}/${dots}`;
      const response = await send(
        rawRequest(`http://${host}/v4/${b.projectId}/x/${climb}/${a.projectId}/${a.appName}/run`, {
          headers: { Authorization: `Bearer ${a.token}` },
        }),
      );
      const body = await response.json<{ code: string }>();
      expect(response.status, dots).toBe(404);
      expect(body.code).toBe("not_found");
    }
    expect(called.length).toBe(before);
    // B's own app still runs on B's domain.
    const own = await send(
      rawRequest(`http://${host}${b.runPath}`, { headers: { Authorization: `Bearer ${b.token}` } }),
    );
    expect(own.status).toBe(200);
  });

  it("the path is read as the URL parser reads it: every raw form names the app the normal form names", () => {
    const p = "proj_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c";
    const q = "proj_11jd7m2q3r4s5t6v7w8x9y0z1a2b3c";
    const target = (raw: string) => {
      const found = pathTarget(new URL(raw, "http://h").pathname);
      return found && `${found.projectId} ${found.appName} ${found.appPath}`;
    };
    expect(target(`/v4/${p}/hello/v1/chat`)).toBe(`${p} hello v1/chat`);
    expect(target(`/v4/${p}/hello/..\\..\\admin`)).toBe(null);
    expect(target(`/v4/${p}/hello/a/.\t./run`)).toBe(`${p} hello run`);
    expect(target(`/v4/${q}/x/%2e%2e/%2e%2e/${p}/hello/run`)).toBe(`${p} hello run`);
    expect(target(`/v4/${p}/hello/runs/run_x`)).toBe(`${p} hello runs/run_x`);
    expect(pathTarget(`/v4/${p}/hello/runs/run_x`)?.reserved).toBe(true);
    expect(target(`/v4/${p}/hello`)).toBe(null);
  });
});
