import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_SECRETS } from "../secrets";
import { chromiumAvailable, launchChromium } from "./browser";
import { type DevServer, startWranglerDev } from "./wrangler-dev";

/**
 * A run's status stream followed by a real EventSource (Debian's Chromium) against `wrangler dev`: the
 * client every browser has, with its own reconnection rules. A browser's EventSource sends no
 * Authorization header, so the test adds the run key to its requests (as a proxy in front would).
 * Skipped without Chromium unless REQUIRE_BROWSER=1, like the dashboard's browser tests.
 */
const available = chromiumAvailable;

describe.runIf(available)("a run's status stream in a browser's EventSource", () => {
  let dir: string;
  let server: DevServer;
  let app: Server;
  let appUrl: string;
  let browser: Browser;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "eg-status-stream-"));
    // The app answers after 2 s: long enough for the stream to see the run running.
    app = createServer((req, res) => {
      req.resume();
      setTimeout(() => res.writeHead(200, { "Content-Type": "application/json" }).end('{"done":true}'), 2000);
    });
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    appUrl = `http://127.0.0.1:${(app.address() as { port: number }).port}`;
    server = await startWranglerDev({ dir, secrets: TEST_SECRETS });
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await new Promise((resolve) => app?.close(resolve));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const api = async <T>(token: string, method: string, path: string, body?: unknown): Promise<T> => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return JSON.parse(text) as T;
  };

  it("gets the run at each change, its end last; reconnects with Last-Event-ID 3, gets 204 and stops", async () => {
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    const { project_id } = await api<{ project_id: string }>(admin, "POST", "/v2/projects", { name: "stream" });
    const expires_at = new Date(Date.now() + 24 * 3600 * 1000).toISOString();
    const { token } = await api<{ token: string }>(admin, "POST", `/v2/projects/${project_id}/service-accounts`, {
      name: "stream",
      expires_at,
    });
    const apps = `/v2/projects/${project_id}/apps`;
    const { app_id } = await api<{ app_id: string }>(token, "POST", apps, {
      name: "slow",
      region: "us-east-1",
      runtime: "cortex",
    });
    const { build_id } = await api<{ build_id: string }>(token, "POST", `${apps}/${app_id}/builds`);
    await api(token, "PATCH", `${apps}/${app_id}/builds/${build_id}`, { status: "building" });
    await api(token, "PATCH", `${apps}/${app_id}/builds/${build_id}`, { status: "succeeded", origin_url: appUrl });
    // The browser is ready before the run starts, so the stream opens while the run is young.
    const context = await browser.newContext();
    // What each request of the EventSource got. (Chromium adds its Last-Event-ID below what interception
    // sees; the 204, answered only to Last-Event-ID 3, is what shows the header arrived.)
    const statuses: number[] = [];
    const statusUrls = `${server.url}/v4/${project_id}/slow/runs/*`;
    await context.route(statusUrls, async (route) => {
      const headers = await route.request().allHeaders();
      await route.continue({ headers: { ...headers, authorization: `Bearer ${token}` } });
    });
    context.on("response", (response) => {
      if (response.url().startsWith(`${server.url}/v4/${project_id}/slow/runs/`)) statuses.push(response.status());
    });
    const page = await context.newPage();
    // Any page of the gateway's origin: the stream is then a same-origin request.
    await page.goto(`${server.url}/v2/openapi.json`);
    const accepted = await api<{ urls: { stream: string } }>(
      token,
      "POST",
      `/v4/${project_id}/slow/run?async=true`,
      {},
    );
    const seen = await page.evaluate(
      (url) =>
        new Promise<{ events: { id: string; status: string }[]; closed: boolean }>((resolve) => {
          const events: { id: string; status: string }[] = [];
          const source = new EventSource(url);
          source.onmessage = (event) => {
            events.push({ id: event.lastEventId, status: (JSON.parse(event.data) as { status: string }).status });
          };
          // After the end the stream closes; the EventSource reconnects, gets 204 and gives up (CLOSED).
          source.onerror = () => {
            if (source.readyState === EventSource.CLOSED) resolve({ events, closed: true });
          };
          setTimeout(() => resolve({ events, closed: source.readyState === EventSource.CLOSED }), 20_000);
        }),
      accepted.urls.stream,
    );
    await context.close();

    expect(seen.closed).toBe(true);
    expect(seen.events.at(-1)).toEqual({ id: "3", status: "succeeded" });
    expect(seen.events.map((e) => e.status)).toContain("running");
    // Ids only grow: nothing was sent twice.
    const ids = seen.events.map((e) => Number(e.id));
    expect(ids).toEqual([...new Set(ids)].sort());
    expect(statuses).toEqual([200, 204]);
  }, 60_000);
});
