import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { TEST_SECRETS } from "../secrets";
import { ensureDnsHarness } from "../global/dns-harness.mjs";
import { CHROMIUM, chromiumAvailable, SCREENSHOTS, shotAndAudit } from "./browser";
import { type DevServer, freePort, startWranglerDev } from "./wrangler-dev";

/**
 * The dashboard in a real browser (Debian's Chromium driven by playwright-core) against `wrangler dev`.
 * Without /usr/bin/chromium (or CHROMIUM_PATH) the suite is skipped with a message, unless REQUIRE_BROWSER=1 (CI), which
 * makes a missing browser a failure.
 */
const available = chromiumAvailable;
const required = process.env.REQUIRE_BROWSER === "1";

if (!available && !required) {
  console.warn(
    `dashboard browser tests skipped: ${CHROMIUM} is missing (install it with scripts/ci-browser.sh, or set REQUIRE_BROWSER=1 to fail instead)`,
  );
}

describe.runIf(required && !available)("dashboard in a browser", () => {
  it("needs Chromium (REQUIRE_BROWSER=1)", () => {
    expect.fail(`${CHROMIUM} is missing; run scripts/ci-browser.sh`);
  });
});

const ISSUER = inject("oidcIssuer");
const BROWSER_CLIENT = { client_id: "edge-gateway-browser", client_secret: "browser-client-secret-0123456789abcdef" };
/** Adds a client or an account at the tests' OpenID provider. */
async function fixture(what: "clients" | "accounts", body: object) {
  const response = await fetch(`${ISSUER}/__fixture/${what}`, { method: "POST", body: JSON.stringify(body) });
  expect(response.status).toBe(204);
}

describe.runIf(available)("dashboard in a browser", () => {
  let dir: string;
  let server: DevServer;
  let context: BrowserContext;
  let page: Page;
  const tab = (name: string) => page.getByRole("navigation", { name: "Project" }).getByRole("link", { name });
  /** A screenshot for CI's artifacts, and an axe-core audit of the page as shown (browser.ts). */
  const shot = (name: string) => shotAndAudit(page, name);

  /** Each page at phone width: no sideways scrolling, a screenshot and an audit; then back to the desktop size. */
  async function atPhoneWidth(pages: readonly (readonly [name: string, path: string])[]) {
    await page.setViewportSize({ width: 375, height: 740 });
    for (const [name, path] of pages) {
      await page.goto(`${server.url}${path}`);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(overflow, name).toBeLessThanOrEqual(0);
      await shot(name);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "eg-dashboard-"));
    mkdirSync(SCREENSHOTS, { recursive: true });
    // Domain validation in wrangler dev resolves through the DNS harness (wrangler.toml's DNS_RESOLVER_URL).
    await ensureDnsHarness();
    // People sign in at the tests' OpenID provider (test/global/oidc.mjs); the client is registered once
    // wrangler dev's port, hence the redirect URI, is known.
    server = await startWranglerDev({
      dir,
      secrets: {
        ...TEST_SECRETS,
        OIDC_ISSUER: ISSUER,
        OIDC_CLIENT_ID: BROWSER_CLIENT.client_id,
        OIDC_CLIENT_SECRET: BROWSER_CLIENT.client_secret,
      },
    });
    await fixture("clients", { ...BROWSER_CLIENT, redirect_uris: [`${server.url}/dashboard/oidc/callback`] });
    context = await launch("profile");
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(10_000);
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const launch = (profile: string, options: { javaScriptEnabled?: boolean } = {}) =>
    chromium.launchPersistentContext(join(dir, profile), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
      viewport: { width: 1280, height: 800 },
      permissions: ["clipboard-read", "clipboard-write"],
      ...options,
    });

  const api = (path: string, token: string, init: { method?: string; body?: unknown } = {}) =>
    fetch(`${server.url}/v2${path}`, {
      method: init.method ?? "GET",
      headers: { Authorization: `Bearer ${token}`, ...(init.body ? { "Content-Type": "application/json" } : {}) },
      body: init.body ? JSON.stringify(init.body) : undefined,
    });

  it("signs in, creates a project and a service account, uses its token, and cancels a build", async () => {
    const errors: string[] = [];
    // Script errors and CSP violations; a refused sign-in's 403 is a response, not an error of the page.
    page.on("pageerror", (error) => errors.push(error.message));
    page.on("console", (message) => {
      if (message.type() === "error" && !/status of 403/.test(message.text())) errors.push(message.text());
    });

    // Sign-in: a wrong token first gets a clear page.
    await page.goto(`${server.url}/dashboard`);
    await expect.poll(() => new URL(page.url()).pathname).toBe("/dashboard/sign-in");
    await shot("01-sign-in");
    await page.getByLabel("Admin token").fill("not-the-token");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByText("That is not the admin token").waitFor();
    await shot("02-sign-in-refused");
    await page.getByLabel("Admin token").fill(TEST_SECRETS.ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("heading", { name: "Projects" }).waitFor();

    // Projects: create one; its page opens with it selected in the switcher.
    await page.getByLabel("Name").fill("Browser project");
    await page.getByRole("button", { name: "Create project" }).click();
    await page.getByRole("heading", { name: /Apps/ }).waitFor();
    const projectId = new URL(page.url()).pathname.split("/")[3]!;
    expect(projectId).toMatch(/^proj_/);
    expect(await page.locator("#project-switcher").inputValue()).toBe(projectId);
    await shot("03-apps-empty");

    // API Keys: create with name and expiry date; the token is shown once and copies to the clipboard.
    await tab("API Keys").click();
    await page.getByLabel("Name").fill("browser-ci");
    const expiry = new Date(Date.now() + 90 * 24 * 3600 * 1000).toISOString().slice(0, 10);
    await page.getByLabel("Expiry date").fill(expiry);
    await page.getByRole("button", { name: "Create service account" }).click();
    await page.getByText("it is shown only once").waitFor();
    const token = await page.locator("#new-token").inputValue();
    expect(token).toMatch(/^egsa_/);
    await page.getByRole("button", { name: "Copy token" }).click();
    await expect.poll(() => page.locator("#live").textContent()).toBe("Copied to the clipboard");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(token);
    await shot("04-api-key-created");

    // The copied token works against the API: create an app and start a build with it.
    const app = await api(`/projects/${projectId}/apps`, token, {
      method: "POST",
      body: { name: "hello", region: "us-east-1", runtime: "cortex" },
    });
    expect(app.status).toBe(201);
    const appId = ((await app.json()) as { app_id: string }).app_id;
    // An empty JSON object: over real HTTP a bodiless POST still has a (empty) body stream, which the API's
    // media-type check refuses with 415.
    const build = await api(`/projects/${projectId}/apps/${appId}/builds`, token, { method: "POST", body: {} });
    expect(build.status).toBe(201);
    const buildId = ((await build.json()) as { build_id: string }).build_id;

    await page.goto(`${server.url}/dashboard/projects/${projectId}/api-keys`);
    await expect(page.locator("#new-token").count()).resolves.toBe(0);
    const row = page.getByRole("row", { name: /browser-ci/ });
    await expect(row.getByText(token.slice(0, 13))).toBeTruthy();
    await expect.poll(async () => (await row.textContent()) ?? "").not.toContain("never");
    await shot("05-api-keys");

    // Apps and builds: the app, then its queued build, cancelled through the confirmation dialog.
    await tab("Apps and builds").click();
    await page.getByRole("link", { name: "hello" }).click();
    const buildRow = page.locator(`#build-${buildId}`);
    await buildRow.getByText("Queued").waitFor();
    await buildRow.getByRole("link", { name: "Cancel" }).click();
    const dialog = page.getByRole("dialog", { name: "Cancel this build?" });
    await dialog.waitFor();
    await shot("06-cancel-dialog");
    await dialog.getByRole("button", { name: "Cancel build" }).click();
    await page.getByText(`Build ${buildId} was cancelled`).waitFor();
    await buildRow.getByText("Cancelled").waitFor();
    await shot("07-build-cancelled");
    const read = await api(`/projects/${projectId}/apps/${appId}/builds/${buildId}`, token);
    expect(((await read.json()) as { status: string }).status).toBe("cancelled");

    expect(errors).toEqual([]);
  });

  /** A project with one service account, made through the API with the admin token. */
  async function seedProject(name: string) {
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    const project = (await (await api("/projects", admin, { method: "POST", body: { name } })).json()) as {
      project_id: string;
    };
    const expires_at = new Date(Date.now() + 30 * 24 * 3600 * 1000).toISOString();
    await api(`/projects/${project.project_id}/service-accounts`, admin, {
      method: "POST",
      body: { name: "keyboard-ci", expires_at },
    });
    return project.project_id;
  }

  /** Signs in unless the browser's session already is. */
  async function signIn() {
    await page.goto(`${server.url}/dashboard/sign-in`);
    if (new URL(page.url()).pathname !== "/dashboard/sign-in") return;
    await page.getByLabel("Admin token").fill(TEST_SECRETS.ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("heading", { name: "Projects" }).waitFor();
  }

  /** An app of the project deployed at `origin` (a build reported succeeded), as the builder would. */
  async function deployApp(projectId: string, name: string, origin: string) {
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    const appId = (
      (await (
        await api(`/projects/${projectId}/apps`, admin, {
          method: "POST",
          body: { name, region: "us-east-1", runtime: "cortex" },
        })
      ).json()) as { app_id: string }
    ).app_id;
    const build = (await (
      await api(`/projects/${projectId}/apps/${appId}/builds`, admin, { method: "POST", body: {} })
    ).json()) as { build_id: string };
    const buildPath = `/projects/${projectId}/apps/${appId}/builds/${build.build_id}`;
    expect((await api(buildPath, admin, { method: "PATCH", body: { status: "building" } })).status).toBe(200);
    expect(
      (await api(buildPath, admin, { method: "PATCH", body: { status: "succeeded", origin_url: origin } })).status,
    ).toBe(200);
    return appId;
  }

  /** Opens `url` until its totals count `runs` (records reach the figures a few seconds after the runs end). */
  async function untilRunsShown(url: string, runs: number) {
    await expect
      .poll(
        async () => {
          await page.goto(url);
          return (
            (await page
              .locator("dl.stats")
              .textContent()
              .catch(() => "")) ?? ""
          );
        },
        { timeout: 30_000 },
      )
      .toMatch(new RegExp(`Runs\\s*${runs}(?!\\d)`));
  }

  it("opens and closes the revoke dialog from the keyboard, and revokes", async () => {
    const projectId = await seedProject("Keyboard project");
    await page.setViewportSize({ width: 1280, height: 800 });
    await signIn();
    await page.goto(`${server.url}/dashboard/projects/${projectId}/api-keys`);
    const revoke = page.getByRole("row", { name: /keyboard-ci/ }).getByRole("link", { name: "Revoke" });
    await revoke.focus();
    await page.keyboard.press("Enter");
    const dialog = page.getByRole("dialog", { name: /Revoke/ });
    await dialog.waitFor();
    // The modal dialog takes focus; Escape closes it and focus returns to the link that opened it.
    expect(await page.evaluate(() => document.activeElement?.closest("dialog") !== null)).toBe(true);
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    expect(await revoke.evaluate((el) => el === document.activeElement)).toBe(true);
    await revoke.click();
    await dialog.getByRole("button", { name: "Revoke" }).click();
    await page.getByText("was revoked").waitFor();
    await page
      .getByRole("row", { name: /keyboard-ci/ })
      .getByText("Revoked")
      .waitFor();
    await shot("08-api-key-revoked");
  });

  it("is usable at phone width: no sideways scrolling", async () => {
    const projectId = await seedProject("Phone project");
    await signIn();
    await atPhoneWidth([
      ["09-phone-projects", "/dashboard/projects"],
      ["10-phone-api-keys", `/dashboard/projects/${projectId}/api-keys`],
      ["11-phone-apps", `/dashboard/projects/${projectId}/apps`],
    ]);
  });

  it("first hour: / leads to the dashboard, pages render in standards mode, a reload creates no second key, Revoke fits a phone", async () => {
    const projectId = await seedProject("First-hour project");
    await page.setViewportSize({ width: 1280, height: 800 });
    await signIn();

    // `/` on the API hostname: a redirect to the dashboard for people, Link headers to the docs for tools.
    const root = await fetch(`${server.url}/`, { redirect: "manual" });
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/dashboard");
    expect(root.headers.get("link")).toContain('</v2/docs>; rel="service-doc"');
    await page.goto(`${server.url}/`);
    await page.getByRole("heading", { name: "Projects" }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/dashboard/projects");

    // Every page has <!DOCTYPE html>: the browser renders it in standards mode, not quirks mode.
    for (const path of [
      "/dashboard/projects",
      `/dashboard/projects/${projectId}/api-keys`,
      `/dashboard/projects/${projectId}/apps`,
      `/dashboard/projects/${projectId}/domains`,
      `/dashboard/projects/${projectId}/webhook-deliveries`,
      "/dashboard/no-such-page",
      "/v2/docs",
    ]) {
      await page.goto(`${server.url}${path}`);
      expect(await page.evaluate(() => document.compatMode), path).toBe("CSS1Compat");
    }

    // Create a key, then reload the page that shows its token: the token is gone, no second key exists.
    await page.goto(`${server.url}/dashboard/projects/${projectId}/api-keys`);
    await page.getByLabel("Name").fill("reload-me");
    await page.getByLabel("Expiry date").fill(new Date(Date.now() + 30 * 24 * 3600 * 1000).toISOString().slice(0, 10));
    await page.getByRole("button", { name: "Create service account" }).click();
    await page.getByText("it is shown only once").waitFor();
    expect(new URL(page.url()).pathname).toBe(`/dashboard/projects/${projectId}/api-keys`);
    expect(await page.locator("#new-token").inputValue()).toMatch(/^egsa_/);
    await page.reload();
    await page.getByRole("row", { name: /reload-me/ }).waitFor();
    expect(await page.locator("#new-token").count()).toBe(0);
    const accounts = (await (
      await api(`/projects/${projectId}/service-accounts`, TEST_SECRETS.ADMIN_TOKEN)
    ).json()) as { data: { name: string }[] };
    expect(accounts.data.filter((a) => a.name === "reload-me")).toHaveLength(1);

    // Phone width: the API Keys table becomes cards; each Revoke is on screen and opens its dialog.
    await page.setViewportSize({ width: 375, height: 740 });
    await page.goto(`${server.url}/dashboard/projects/${projectId}/api-keys`);
    const wrap = await page.locator(".table-wrap").evaluate((el) => el.scrollWidth - el.clientWidth);
    expect(wrap, "the table scrolls sideways").toBeLessThanOrEqual(0);
    for (const revoke of await page.getByRole("link", { name: "Revoke" }).all()) {
      const box = (await revoke.boundingBox())!;
      expect(box.x).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width).toBeLessThanOrEqual(375);
    }
    await page
      .getByRole("row", { name: /reload-me/ })
      .getByRole("link", { name: "Revoke" })
      .click();
    await page.getByRole("dialog", { name: /Revoke/ }).waitFor();
    await shot("24-phone-api-keys-cards");
    await page.keyboard.press("Escape");
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  /** An app upstream (`/run`) and a webhook receiver (`/webhook`) in one tiny Node server, on a free port. */
  async function startPeer() {
    const hooks: { id: string; body: string }[] = [];
    const peer: Server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        if (req.url === "/webhook") {
          hooks.push({ id: String(req.headers["x-request-id"] ?? ""), body: Buffer.concat(chunks).toString("utf8") });
          res.writeHead(204).end();
        } else {
          res
            .writeHead(200, { "content-type": "application/json" })
            .end(JSON.stringify({ greeting: "Hello from the browser test" }));
        }
      });
    });
    const port = await freePort();
    await new Promise<void>((resolve) => peer.listen(port, "127.0.0.1", resolve));
    return {
      url: `http://127.0.0.1:${port}`,
      hooks,
      close: () => new Promise<void>((resolve) => peer.close(() => resolve())),
    };
  }

  it("adds domains, validates one against the DNS harness, shows a failed one's error in the dialog, and shows a webhook delivery", async () => {
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    const projectId = await seedProject("Domains project");
    await page.setViewportSize({ width: 1280, height: 800 });
    await signIn();
    await page.goto(`${server.url}/dashboard/projects/${projectId}/apps`);

    // Add a subdomain: its page shows the CNAME to create, and the value copies to the clipboard.
    await tab("Domains").click();
    await page.getByRole("heading", { name: /Domains/ }).waitFor();
    await shot("13-domains-empty");
    await page.getByRole("textbox", { name: "Domain" }).fill("good.example.test");
    await page.getByLabel("Region").selectOption("us-east-1");
    await page.getByRole("button", { name: "Add domain" }).click();
    await page.getByRole("heading", { name: "DNS record to create" }).waitFor();
    const record = page.getByRole("table", { name: "DNS record to create for good.example.test" });
    await record.getByRole("cell", { name: "CNAME" }).waitFor();
    expect(await page.locator("#record-name").inputValue()).toBe("good.example.test");
    expect(await page.locator("#record-value").inputValue()).toBe("proxy.aws.us-east-1.service.test");
    await page.getByRole("button", { name: "Copy record value" }).click();
    await expect.poll(() => page.locator("#live").textContent()).toBe("Copied to the clipboard");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe("proxy.aws.us-east-1.service.test");
    await page.getByText("Pending", { exact: true }).first().waitFor();
    await shot("14-domain-dns-record");

    // Validate Domain: the harness serves the right CNAME, so it is Validated.
    await page.getByRole("button", { name: "Validate Domain" }).click();
    await page.getByText("Validated. good.example.test points at us").waitFor();
    await shot("15-domain-validated");

    // A domain pointed elsewhere: validation fails, and the status dialog says why, when and until when.
    await tab("Domains").click();
    await page.getByRole("textbox", { name: "Domain" }).fill("wrong.example.test");
    await page.getByRole("button", { name: "Add domain" }).click();
    await page.getByRole("heading", { name: "DNS record to create" }).waitFor();
    await page.getByRole("button", { name: "Validate Domain" }).click();
    await page.getByText(/Not validated: Failed\./).waitFor();
    await tab("Domains").click();
    const goodRow = page.getByRole("row", { name: /good\.example\.test/ });
    await goodRow.getByRole("cell", { name: "Validated", exact: true }).waitFor();
    const opener = page
      .getByRole("row", { name: /wrong\.example\.test/ })
      .getByRole("link", { name: /Validation status/ });
    await opener.focus();
    await page.keyboard.press("Enter");
    const dialog = page.getByRole("dialog", { name: "Validation status of wrong.example.test" });
    await dialog.waitFor();
    expect(await page.evaluate(() => document.activeElement?.closest("dialog") !== null)).toBe(true);
    const facts = (await dialog.textContent()) ?? "";
    expect(facts).toMatch(/WRONG_TARGET.*wrong\.example\.test has a CNAME to elsewhere\.test/);
    expect(facts).toMatch(/Last attempt\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    expect(facts).toContain("Next automatic attempt");
    expect(facts).toMatch(/Automatic attempts end\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    await shot("16-domain-status-dialog");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    expect(await opener.evaluate((el) => el === document.activeElement)).toBe(true);

    // Remove, through the confirmation dialog.
    await page
      .getByRole("row", { name: /wrong\.example\.test/ })
      .getByRole("link", { name: "Remove" })
      .click();
    const confirm = page.getByRole("dialog", { name: "Remove wrong.example.test?" });
    await confirm.getByRole("button", { name: "Remove domain" }).click();
    await page.getByText("wrong.example.test was removed").waitFor();
    await shot("17-domains");

    // A run with webhookEndpoint: the delivery appears, delivered, with its attempt. A cortex app, so the
    // caller gets the envelope and the receiver the same bytes (a custom app's delivery is the run's document).
    const peer = await startPeer();
    try {
      const app = await api(`/projects/${projectId}/apps`, admin, {
        method: "POST",
        body: { name: "hooked", region: "us-east-1", runtime: "cortex" },
      });
      const appId = ((await app.json()) as { app_id: string }).app_id;
      const build = (await (
        await api(`/projects/${projectId}/apps/${appId}/builds`, admin, { method: "POST", body: {} })
      ).json()) as { build_id: string };
      const buildPath = `/projects/${projectId}/apps/${appId}/builds/${build.build_id}`;
      expect((await api(buildPath, admin, { method: "PATCH", body: { status: "building" } })).status).toBe(200);
      expect(
        (await api(buildPath, admin, { method: "PATCH", body: { status: "succeeded", origin_url: `${peer.url}/run` } }))
          .status,
      ).toBe(200);
      const run = await fetch(
        `${server.url}/v4/${projectId}/hooked/run?webhookEndpoint=${encodeURIComponent(`${peer.url}/webhook`)}`,
        {
          method: "POST",
          // With a secret the delivery is signed, and carries its id (X-Request-Id) for the test to find its row.
          headers: {
            Authorization: `Bearer ${admin}`,
            "Content-Type": "application/json",
            "X-Webhook-Secret": "browser-test-webhook-secret",
          },
          body: JSON.stringify({ inputs: { name: "browser" } }),
        },
      );
      const answer = await run.text();
      expect(run.status, answer).toBe(200);
      const runId = (JSON.parse(answer) as { run_id: string }).run_id;
      await expect.poll(() => peer.hooks.length, { timeout: 20_000 }).toBe(1);
      expect(peer.hooks[0]!.body).toBe(answer);
      expect(peer.hooks[0]!.id).toMatch(/^whd_/);

      await tab("Webhook deliveries").click();
      const row = page.locator(`#delivery-${peer.hooks[0]!.id}`);
      await expect
        .poll(
          async () => {
            await page.reload();
            return (await row.count()) > 0 ? ((await row.textContent()) ?? "") : "";
          },
          { timeout: 20_000 },
        )
        .toContain("Delivered");
      expect(await row.textContent()).toMatch(/#1.*HTTP 204, \d+ ms/);
      await shot("18-webhook-deliveries");
      await page.getByLabel("Run id").fill(runId);
      await page.getByRole("button", { name: "Filter" }).click();
      await expect.poll(() => new URL(page.url()).searchParams.get("run_id")).toBe(runId);
      await row.getByText("Delivered").waitFor();
      expect(await page.getByLabel("Run id").inputValue()).toBe(runId);
      await shot("19-webhook-deliveries-filtered");
    } finally {
      await peer.close();
    }

    // Phone width: no sideways scrolling on the new pages either.
    await atPhoneWidth([
      ["20-phone-domains", `/dashboard/projects/${projectId}/domains`],
      ["21-phone-domain", `/dashboard/projects/${projectId}/domains/good.example.test`],
      ["22-phone-webhook-deliveries", `/dashboard/projects/${projectId}/webhook-deliveries`],
    ]);
  });

  it("works without script: confirmations become pages, the token stays selectable", async () => {
    const projectId = await seedProject("No-script project");
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    const appId = `${projectId}-plain`;
    await api(`/projects/${projectId}/apps`, admin, {
      method: "POST",
      body: { name: "plain", region: "us-east-1", runtime: "custom" },
    });
    const build = (await (
      await api(`/projects/${projectId}/apps/${appId}/builds`, admin, { method: "POST", body: {} })
    ).json()) as { build_id: string };
    const plain = await launch("profile-no-script", { javaScriptEnabled: false });
    try {
      const p = plain.pages()[0] ?? (await plain.newPage());
      p.setDefaultTimeout(10_000);
      await p.goto(`${server.url}/dashboard/sign-in`);
      await p.getByLabel("Admin token").fill(admin);
      await p.getByRole("button", { name: "Sign in", exact: true }).click();
      await p.getByRole("heading", { name: "Projects" }).waitFor();
      await p.goto(`${server.url}/dashboard/projects/${projectId}/apps/${appId}`);
      await p.locator(`#build-${build.build_id}`).getByRole("link", { name: "Cancel" }).click();
      await p.getByRole("heading", { name: "Cancel this build?" }).waitFor();
      expect(new URL(p.url()).pathname).toMatch(/\/cancel$/);
      await p.screenshot({ path: join(SCREENSHOTS, "12-no-script-confirmation.png"), fullPage: true });
      await p.getByRole("button", { name: "Cancel build" }).click();
      await p.getByText(`Build ${build.build_id} was cancelled`).waitFor();
      // The copy button needs script, so it stays hidden; the token field is there to select.
      await p.goto(`${server.url}/dashboard/projects/${projectId}/api-keys`);
      await p.getByLabel("Name").fill("no-script");
      await p.getByLabel("Expiry date").fill(new Date(Date.now() + 7 * 24 * 3600 * 1000).toISOString().slice(0, 10));
      await p.getByRole("button", { name: "Create service account" }).click();
      expect(await p.locator("#new-token").inputValue()).toMatch(/^egsa_/);
      expect(await p.getByRole("button", { name: "Copy token" }).isVisible()).toBe(false);
      // The validation status dialog is a page of its own, with the same Validate Domain button.
      const domain = "no-script.wild.example.test";
      expect(
        (await api(`/projects/${projectId}/domains`, admin, { method: "POST", body: { domain, region: "us-east-1" } }))
          .status,
      ).toBe(201);
      await p.goto(`${server.url}/dashboard/projects/${projectId}/domains`);
      await p
        .getByRole("row", { name: new RegExp(domain) })
        .getByRole("link", { name: /Validation status/ })
        .click();
      await p.getByRole("heading", { name: `Validation status of ${domain}` }).waitFor();
      expect(new URL(p.url()).pathname).toMatch(/\/status$/);
      await p.screenshot({ path: join(SCREENSHOTS, "23-no-script-domain-status.png"), fullPage: true });
      await p.getByRole("button", { name: "Validate Domain" }).click();
      await p.getByText(`Validated. ${domain} points at us`).waitFor();
    } finally {
      await plain.close();
    }
  });

  it("signs a person in through the OpenID provider's own page; an owner invites on the Members page, a viewer sees no controls", async () => {
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    const projectId = await seedProject("People project");
    const stamp = Date.now().toString(36);
    const owner = {
      sub: `owner-${stamp}`,
      email: `owner-${stamp}@example.test`,
      email_verified: true,
      name: "Olive Owner",
    };
    const viewer = {
      sub: `viewer-${stamp}`,
      email: `viewer-${stamp}@example.test`,
      email_verified: true,
      name: "Victor Viewer",
    };
    await fixture("accounts", owner);
    await fixture("accounts", viewer);
    expect(
      (
        await api(`/projects/${projectId}/invites`, admin, {
          method: "POST",
          body: { email: owner.email, role: "owner" },
        })
      ).status,
    ).toBe(201);

    const signIn = async (context: BrowserContext, login: string) => {
      const p = context.pages()[0] ?? (await context.newPage());
      p.setDefaultTimeout(10_000);
      await p.goto(`${server.url}/dashboard`);
      await p.getByRole("link", { name: "Sign in with single sign-on" }).click();
      // The provider's own login page, then back through the callback to the dashboard.
      await p.waitForURL((url) => url.origin === ISSUER);
      await p.getByLabel("Login").fill(login);
      await p.getByRole("button", { name: "Continue" }).click();
      await p.getByRole("heading", { name: "Projects" }).waitFor();
      return p;
    };

    const operatorPage = page;
    const ownerContext = await launch(`person-owner-${stamp}`);
    const viewerContext = await launch(`person-viewer-${stamp}`);
    try {
      page = await signIn(ownerContext, owner.sub);
      await shot("30-person-projects");
      await page.getByText(`${owner.name} (${owner.email})`).waitFor();
      await page.getByRole("link", { name: "People project" }).click();
      await tab("Members").click();
      await page.getByRole("heading", { name: /Members/ }).waitFor();
      await page.getByLabel("Email", { exact: true }).fill(viewer.email);
      await page.getByLabel("Role", { exact: true }).selectOption("viewer");
      await page.getByRole("button", { name: "Invite", exact: true }).click();
      await page.getByText(`${viewer.email} is invited as viewer`).waitFor();
      await shot("31-members-owner");

      const viewerPage = await signIn(viewerContext, viewer.sub);
      await viewerPage.getByRole("link", { name: "People project" }).click();
      await viewerPage.getByRole("navigation", { name: "Project" }).getByRole("link", { name: "Members" }).click();
      await viewerPage.getByText("Your role in this project is viewer").waitFor();
      expect(await viewerPage.getByRole("button", { name: "Invite", exact: true }).count()).toBe(0);
      expect(
        await viewerPage
          .getByRole("row", { name: /Victor Viewer/ })
          .getByRole("link", { name: "Leave" })
          .count(),
      ).toBe(1);
      page = viewerPage;
      await shot("32-members-viewer");

      // The owner's page now lists the viewer as a member (the invite was claimed at sign-in).
      const ownerPage = ownerContext.pages()[0]!;
      await ownerPage.goto(`${server.url}/dashboard/projects/${projectId}/members`);
      await ownerPage.getByRole("row", { name: /Victor Viewer/ }).waitFor();
      expect(await ownerPage.getByText("No open invites.").count()).toBe(1);
    } finally {
      page = operatorPage;
      await ownerContext.close();
      await viewerContext.close();
    }
  });

  /**
   * Upstreams and receivers for the usage pages: on one origin an app (`/run`, a little latency), an
   * app that fails (`/fail`, 500) and a receiver (`/webhook`, 204); on another origin a receiver that
   * needs a retry (`/flaky/…`: 404 first) and one that refuses for good (`/gone`, 410).
   */
  async function startUsagePeers() {
    const seen = new Set<string>();
    const listen = async (handler: (url: string, res: ServerResponse) => void) => {
      const server: Server = createServer((req, res) => {
        req.resume();
        req.on("end", () => handler(req.url ?? "/", res));
      });
      const port = await freePort();
      await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
      return {
        url: `http://127.0.0.1:${port}`,
        close: () => new Promise<void>((resolve) => server.close(() => resolve())),
      };
    };
    let n = 0;
    const apps = await listen((url, res) => {
      if (url.startsWith("/fail"))
        return void res.writeHead(500, { "content-type": "application/json" }).end('{"error":"model crashed"}');
      if (url === "/webhook") return void res.writeHead(204).end();
      // Latency that varies from run to run, so the percentiles differ.
      setTimeout(
        () => res.writeHead(200, { "content-type": "application/json" }).end('{"greeting":"Hello"}'),
        20 + ((n++ * 37) % 160),
      );
    });
    const receivers = await listen((url, res) => {
      if (url.startsWith("/flaky/") && !seen.has(url)) {
        seen.add(url);
        return void res.writeHead(404).end();
      }
      res.writeHead(url === "/gone" ? 410 : 204).end();
    });
    return { apps: apps.url, receivers: receivers.url, close: () => Promise.all([apps.close(), receivers.close()]) };
  }

  it("shows usage as charts, every run in the list with filters, and receivers' health after real runs", async () => {
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    const projectId = await seedProject("Usage project");
    await page.setViewportSize({ width: 1280, height: 800 });
    await signIn();
    const peers = await startUsagePeers();
    try {
      const helloId = await deployApp(projectId, "hello-world", `${peers.apps}/run`);
      await deployApp(projectId, "image-model", `${peers.apps}/fail`);
      const run = (app: string, query = "") =>
        fetch(`${server.url}/v4/${projectId}/${app}/run${query}`, {
          method: "POST",
          headers: {
            Authorization: `Bearer ${admin}`,
            "Content-Type": "application/json",
            "X-Webhook-Secret": "usage-test-webhook-secret",
          },
          body: JSON.stringify({ inputs: { prompt: "a lighthouse at dusk" } }),
        }).then(async (r) => ({ status: r.status, body: await r.text() }));
      const hook = (url: string) => `?webhookEndpoint=${encodeURIComponent(url)}`;
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++) statuses.push((await run("hello-world")).status);
      for (let i = 0; i < 3; i++) statuses.push((await run("image-model")).status);
      for (const url of [
        `${peers.apps}/webhook`,
        `${peers.apps}/webhook`,
        `${peers.receivers}/flaky/1`,
        `${peers.receivers}/gone`,
      ])
        statuses.push((await run("hello-world", hook(url))).status);
      const accepted = await run("hello-world", "?async=true");
      expect(accepted.status, accepted.body).toBe(202);
      expect(statuses.filter((s) => s === 200)).toHaveLength(16);
      expect(statuses.filter((s) => s >= 500)).toHaveLength(3);

      // The project's usage: 20 runs once the async one has finished, as totals and charts.
      const usage = `${server.url}/dashboard/projects/${projectId}/usage?range=1h`;
      await untilRunsShown(usage, 20);
      await tab("Usage").waitFor();
      expect(
        await page
          .getByRole("img", { name: /^Runs by status 20 runs in the last 1 hour: 17 2xx, 0 4xx, 3 5xx\.$/ })
          .count(),
      ).toBe(1);
      expect(await page.getByRole("img", { name: /^Latency In the last 1 hour: p50 \d+ ms/ }).count()).toBe(1);
      // A chart's figures as a table, behind its disclosure.
      await page.locator("#project-runs").getByText("Figures as a table").click();
      await page.getByRole("table", { name: "Runs by status" }).waitFor();
      await page.locator("#project-runs").getByText("Figures as a table").click();
      await shot("40-usage-project");

      // One app's page: its own figures above its builds.
      await tab("Apps and builds").click();
      await page
        .getByRole("img", { name: /^Runs per minute since \d\d:\d\d UTC: 17 runs, 0 errors, p95 \d+ ms$/ })
        .waitFor();
      await page.getByRole("img", { name: /^Runs per minute since \d\d:\d\d UTC: 3 runs, 3 errors/ }).waitFor();
      await shot("47-apps-last-day");
      await page.getByRole("link", { name: "hello-world" }).click();
      await page.getByRole("link", { name: "1 hour" }).click();
      await page
        .getByRole("img", { name: /^Runs by status 17 runs in the last 1 hour: 17 2xx, 0 4xx, 0 5xx\.$/ })
        .waitFor();
      expect(new URL(page.url()).pathname).toBe(`/dashboard/projects/${projectId}/apps/${helloId}`);
      await shot("41-usage-app");

      // Every run, newest first (the async one too), filtered by status class through the form.
      await tab("Runs").click();
      await page.getByRole("heading", { name: /Runs/ }).waitFor();
      expect(await page.locator("tbody tr").count()).toBe(20);
      await page.getByRole("row").filter({ hasText: "async" }).first().waitFor();
      await shot("42-runs");
      await page.getByLabel("Status").selectOption("5xx");
      await page.getByRole("button", { name: "Filter" }).click();
      await expect.poll(() => new URL(page.url()).searchParams.get("status")).toBe("5xx");
      await page.getByRole("link", { name: "Show all" }).waitFor();
      expect(await page.locator("tbody tr").count(), (await page.locator("main").textContent()) ?? "").toBe(3);
      expect(await page.getByRole("row").filter({ hasText: "image-model" }).count()).toBe(3);
      await shot("43-runs-filtered");

      // Receivers: one origin healthy, the other with a retried delivery and one refused for good.
      await tab("Receivers").click();
      await page.getByRole("link", { name: "1 hour" }).click();
      const other = page.getByRole("row", { name: new RegExp(peers.receivers.replace(/[.:/]/g, "\\$&")) });
      await expect
        .poll(
          async () => {
            await page.reload();
            return (await other.count()) > 0 ? ((await other.textContent()) ?? "") : "";
          },
          { timeout: 20_000 },
        )
        .toContain("the receiver answered 410");
      await page
        .getByRole("row", { name: new RegExp(peers.apps.replace(/[.:/]/g, "\\$&")) })
        .getByText("Healthy")
        .waitFor();
      await shot("44-receivers");

      // A dark system gets the dark palette, charts included, as readable (the audit checks contrast).
      await page.emulateMedia({ colorScheme: "dark" });
      try {
        for (const [name, path] of [
          ["50-dark-usage", `/dashboard/projects/${projectId}/usage?range=1h`],
          ["51-dark-runs", `/dashboard/projects/${projectId}/runs`],
          ["52-dark-receivers", `/dashboard/projects/${projectId}/webhook-receivers`],
          ["53-dark-apps", `/dashboard/projects/${projectId}/apps`],
          ["54-dark-api-keys", `/dashboard/projects/${projectId}/api-keys`],
        ] as const) {
          await page.goto(`${server.url}${path}`);
          expect(await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor), name).toBe(
            "rgb(17, 24, 39)",
          );
          await shot(name);
        }
      } finally {
        await page.emulateMedia({ colorScheme: "light" });
      }

      // Phone width: the pages fit, the charts shrink with the screen.
      await atPhoneWidth([
        ["45-phone-usage", `/dashboard/projects/${projectId}/usage?range=1h`],
        ["46-phone-runs", `/dashboard/projects/${projectId}/runs`],
        ["48-phone-apps", `/dashboard/projects/${projectId}/apps`],
        ["49-phone-receivers", `/dashboard/projects/${projectId}/webhook-receivers`],
      ]);

      // Without script the charts are there all the same: they are drawn on the server.
      const plain = await launch("profile-usage-no-script", { javaScriptEnabled: false });
      try {
        const p = plain.pages()[0] ?? (await plain.newPage());
        await p.goto(`${server.url}/dashboard/sign-in`);
        await p.getByLabel("Admin token").fill(admin);
        await p.getByRole("button", { name: "Sign in", exact: true }).click();
        await p.getByRole("heading", { name: "Projects" }).waitFor();
        await p.goto(usage);
        expect(await p.getByRole("img", { name: /^Runs by status 20 runs/ }).count()).toBe(1);
        expect(await p.locator("figure.chart svg rect.tone-c2xx").count()).toBeGreaterThan(0);
      } finally {
        await plain.close();
      }
    } finally {
      await peers.close();
    }
  });

  it("a new project with a handful of runs: Usage opens where they are, equal percentiles and two errors stay visible, a run id leads to its page", async () => {
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    const projectId = await seedProject("First runs");
    await page.setViewportSize({ width: 1280, height: 800 });
    await signIn();
    // An app that answers in a steady 40 ms (its p95 and p99 are one value) and one that fails.
    const app = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        if (req.url?.startsWith("/fail")) return res.writeHead(503, { "content-type": "application/json" }).end("{}");
        setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}'), 40);
      });
    });
    const port = await freePort();
    await new Promise<void>((resolve) => app.listen(port, "127.0.0.1", resolve));
    try {
      await deployApp(projectId, "steady", `http://127.0.0.1:${port}/ok`);
      await deployApp(projectId, "flaky", `http://127.0.0.1:${port}/fail`);
      const run = (name: string, query = "") =>
        fetch(`${server.url}/v4/${projectId}/${name}/run${query}`, {
          method: "POST",
          headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
          body: JSON.stringify({ inputs: { name: "first" } }),
        }).then(async (r) => ({ status: r.status, runId: r.headers.get("x-run-id"), body: await r.text() }));
      for (let i = 0; i < 5; i++) expect((await run("steady")).status).toBe(200);
      let failedRun = "";
      for (let i = 0; i < 2; i++) {
        const failed = await run("flaky");
        expect(failed.status).toBe(503);
        failedRun = failed.runId!;
      }
      const accepted = JSON.parse((await run("steady", "?async=true")).body) as { run_id: string };

      // Without a range the page opens where the runs are: minutes, not one bar at the edge of a day.
      const usage = `${server.url}/dashboard/projects/${projectId}/usage`;
      await untilRunsShown(usage, 8);
      expect(await page.getByRole("link", { name: "Where the runs are" }).getAttribute("aria-current")).toBe("page");
      await page
        .getByRole("img", { name: /^Runs by status 8 runs since \d\d:\d\d UTC: 6 2xx, 0 4xx, 2 5xx\.$/ })
        .waitFor();
      // The bars take the chart's width: 15 one-minute buckets at least, not 60 or 24.
      const bars = await page.locator("#project-runs .bars > g").count();
      expect(bars).toBeGreaterThanOrEqual(15);
      expect(bars).toBeLessThanOrEqual(20);
      // Two failed runs beside six good ones are drawn at least two pixels high, whatever the scale.
      const failed = await page
        .locator("#project-runs rect.tone-c5xx")
        .evaluateAll((rects) => rects.map((r) => r.getBoundingClientRect().height));
      expect(failed.length).toBeGreaterThan(0);
      for (const height of failed) expect(height).toBeGreaterThanOrEqual(2);
      // p95 and p99 are one value: a ring around a square around a dot, each visible.
      const marks = await page.evaluate(() =>
        ["p99", "p95", "p50"].map((tone) => {
          const mark = document.querySelector(`#project-latency .tone-${tone} .mark`);
          const box = mark?.getBoundingClientRect();
          return box ? Math.round(box.width) : 0;
        }),
      );
      expect(marks[0]).toBeGreaterThan(marks[1]!);
      expect(marks[1]).toBeGreaterThan(marks[2]!);
      expect(marks[2]).toBeGreaterThan(0);
      await shot("60-first-runs-usage");

      // The Runs list: who failed, and each run id leads to its page.
      await tab("Runs").click();
      await page.getByRole("heading", { name: /Runs/ }).waitFor();
      await page.getByRole("row").filter({ hasText: "flaky" }).first().getByText("the app's own 503").waitFor();
      await shot("61-first-runs-list");
      await page.getByRole("link", { name: accepted.run_id }).first().click();
      await page.getByRole("heading", { name: "Timeline" }).waitFor();
      expect(new URL(page.url()).pathname).toBe(`/dashboard/projects/${projectId}/runs/${accepted.run_id}`);
      await page.getByRole("heading", { name: "Result" }).waitFor();
      expect(await page.locator("main").textContent()).toContain("succeeded");
      await shot("62-run-page");
      // A failed run's page: whose failure, and its moments.
      await page.goto(`${server.url}/dashboard/projects/${projectId}/runs/${failedRun}`);
      await page.getByText("the app's own 503").first().waitFor();
      await page.getByText("App answered", { exact: true }).waitFor();
      await shot("63-run-page-failed");
    } finally {
      await new Promise<void>((resolve) => app.close(() => resolve()));
    }
  });
});
