import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_SECRETS } from "../secrets";
import { apiAs, chromiumAvailable, launchChromium, SCREENSHOTS, shotAndAudit } from "./browser";
import { type DevServer, startWranglerDev } from "./wrangler-dev";

/**
 * The dashboard stays current, at a laptop's width (1280) and a phone's (390), in Debian's Chromium
 * against `wrangler dev`: a slow synchronous run appears on the Runs page while it runs, without a
 * reload, and its own page moves to its end by itself; at 390 px no page scrolls sideways and the Runs
 * page (a full page of 25 runs) is at most twice as tall as at 1280. Every page is audited with
 * axe-core at both widths. Skipped without Chromium unless REQUIRE_BROWSER=1 (as the other browser tests).
 *
 * The slow run is held by the app until the test lets it answer (the 15 s run, shortened to
 * what the assertions need: "appears while it runs and its page reaches its end by itself"; a run is
 * under way on the page about a second after its admission), so a busy machine cannot end it early.
 */
const available = chromiumAvailable;
const LAPTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

describe.runIf(available)("the dashboard stays current, at laptop and phone width", () => {
  let dir: string;
  let server: DevServer;
  let app: Server;
  let appUrl: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const admin = TEST_SECRETS.ADMIN_TOKEN;
  const held: (() => void)[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "eg-dashboard-live-"));
    mkdirSync(SCREENSHOTS, { recursive: true });
    // The app: `/slow` answers once the test calls `release`, anything else at once.
    app = createServer((req, res) => {
      req.resume();
      const answer = () => res.writeHead(200, { "Content-Type": "application/json" }).end('{"done":true}');
      if (req.url?.startsWith("/slow")) held.push(answer);
      else answer();
    });
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    appUrl = `http://127.0.0.1:${(app.address() as { port: number }).port}`;
    server = await startWranglerDev({ dir, secrets: TEST_SECRETS });
    browser = await launchChromium();
    context = await browser.newContext({ viewport: LAPTOP });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await new Promise((resolve) => app?.close(resolve));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const api = apiAs(() => server.url, admin);
  const run = (projectId: string, path: string) =>
    fetch(`${server.url}/v4/${projectId}/live/${path}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
      body: "{}",
    });

  const shot = shotAndAudit;
  const sideways = (p: Page) => p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  const height = (p: Page) => p.evaluate(() => document.documentElement.scrollHeight);

  it("shows a slow synchronous run while it runs, and its page reaches the run's end by itself; fits a phone", async () => {
    const { project_id: projectId } = await api<{ project_id: string }>("POST", "/projects", { name: "Live project" });
    const { app_id: appId } = await api<{ app_id: string }>("POST", `/projects/${projectId}/apps`, {
      name: "live",
      region: "us-east-1",
      runtime: "cortex",
    });
    const { build_id } = await api<{ build_id: string }>("POST", `/projects/${projectId}/apps/${appId}/builds`, {});
    const build = `/projects/${projectId}/apps/${appId}/builds/${build_id}`;
    await api("PATCH", build, { status: "building" });
    await api("PATCH", build, { status: "succeeded", origin_url: appUrl });
    // A full page of the Runs list: 25 quick runs.
    for (let i = 0; i < 25; i++) expect((await run(projectId, "run")).status).toBe(200);

    await page.goto(`${server.url}/dashboard/sign-in`);
    await page.getByLabel("Admin token").fill(admin);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("heading", { name: "Projects" }).waitFor();
    const runsUrl = `${server.url}/dashboard/projects/${projectId}/runs`;
    await expect
      .poll(
        async () => {
          await page.goto(runsUrl);
          return page.locator("tbody tr").count();
        },
        { timeout: 30_000 },
      )
      .toBe(25);
    await page.getByText("Live: runs appear as they start and end").waitFor();
    const laptopHeight = await height(page);

    // The slow run starts; the page, not reloaded, shows it under way while the caller still waits.
    const navigations: string[] = [];
    page.on("framenavigated", (frame) => {
      if (frame === page.mainFrame()) navigations.push(frame.url());
    });
    let answered = false;
    const slow = run(projectId, "slow").then(async (response) => {
      answered = true;
      return { status: response.status, runId: response.headers.get("x-run-id"), body: await response.text() };
    });
    const startedAt = Date.now();
    const underWay = page.locator("#runs-under-way [data-under-way]");
    await underWay.first().waitFor();
    expect(answered, "the run is shown while it runs").toBe(false);
    const runId = (await underWay.first().locator("code").textContent())!;
    expect(runId).toMatch(/^run_/);
    expect(await underWay.first().textContent()).toContain("sync");
    await shot(page, "70-live-runs-under-way");

    // Its page, opened while it runs, says so and moves on to its end by itself.
    const runPage = await context.newPage();
    await runPage.goto(`${server.url}/dashboard/projects/${projectId}/runs/${runId}`);
    await runPage.getByText("Live: this page follows the run to its end").waitFor();
    expect(await runPage.locator("main").textContent()).toContain("under way: its outcome");
    expect(answered).toBe(false);
    await shot(runPage, "71-live-run-under-way");
    // The screen as a person sees it (docs/images is made from these, reduced with pngquant).
    await runPage.screenshot({ path: join(SCREENSHOTS, "71-live-run-under-way-screen.png") });
    const runNavigations: string[] = [];
    runPage.on("framenavigated", (frame) => {
      if (frame === runPage.mainFrame()) runNavigations.push(frame.url());
    });
    // The app answers now: the run took as long as the page needed to show it under way.
    const tookMs = Date.now() - startedAt;
    held.splice(0).forEach((answer) => answer());
    const done = await slow;
    expect(done.status, done.body).toBe(200);
    expect(done.runId).toBe(runId);
    await runPage.getByText("Ended: this page is final.").waitFor({ timeout: 15_000 });
    const ended = (await runPage.locator("#run-live").textContent())!;
    expect(ended).toContain("the app answered, and its answer reached its end");
    const endedAfter = /Ended\s*\+([\d.]+) s/.exec(ended);
    expect(Number(endedAfter?.[1]) * 1000).toBeGreaterThanOrEqual(tookMs - 1000);
    expect(runNavigations, "the run's page was never reloaded").toEqual([]);
    await shot(runPage, "72-live-run-ended");

    // The Runs page, never reloaded either, has the run in its list now, and nothing under way.
    await page.locator(`#run-${runId}`).waitFor({ timeout: 15_000 });
    expect(await underWay.count()).toBe(0);
    expect(navigations, "the Runs page was never reloaded").toEqual([]);
    await shot(page, "73-live-runs-ended");

    // Every page at phone width: nothing scrolls sideways, each passes the audit; the Runs page is compact.
    const pages: [string, string][] = [
      ["80-phone-projects", "/dashboard/projects"],
      ["81-phone-usage", `/dashboard/projects/${projectId}/usage`],
      ["82-phone-apps", `/dashboard/projects/${projectId}/apps`],
      ["83-phone-app", `/dashboard/projects/${projectId}/apps/${appId}`],
      ["84-phone-api-keys", `/dashboard/projects/${projectId}/api-keys`],
      ["85-phone-domains", `/dashboard/projects/${projectId}/domains`],
      ["86-phone-runs", `/dashboard/projects/${projectId}/runs`],
      ["87-phone-run", `/dashboard/projects/${projectId}/runs/${runId}`],
      ["88-phone-deliveries", `/dashboard/projects/${projectId}/webhook-deliveries`],
      ["89-phone-receivers", `/dashboard/projects/${projectId}/webhook-receivers`],
      ["90-phone-members", `/dashboard/projects/${projectId}/members`],
      ["91-phone-audit-log", `/dashboard/projects/${projectId}/audit-log`],
      ["92-phone-not-found", `/dashboard/projects/${projectId}/${"a-very-long-path-segment".repeat(8)}/x`],
    ];
    for (const size of [LAPTOP, PHONE]) {
      await page.setViewportSize(size);
      for (const [name, path] of pages) {
        await page.goto(`${server.url}${path}`);
        expect(await sideways(page), `${name} at ${size.width} px`).toBeLessThanOrEqual(0);
        if (size === PHONE) await shot(page, name);
      }
    }
    await page.goto(runsUrl);
    await page.screenshot({ path: join(SCREENSHOTS, "86-phone-runs-screen.png") });
    const phoneHeight = await height(page);
    expect(await page.locator("tbody tr").count()).toBe(25);
    expect(
      phoneHeight,
      `the Runs page at 390 px (${phoneHeight} px) against 1280 px (${laptopHeight} px)`,
    ).toBeLessThanOrEqual(2 * laptopHeight);
    // The navigation is compact: the header and the project's tabs take little of a phone's screen.
    const nav = await page.evaluate(() => document.querySelector("nav.tabs")!.getBoundingClientRect().bottom);
    expect(nav).toBeLessThanOrEqual(110);
    await page.setViewportSize(LAPTOP);
  }, 180_000);
});
