import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_SECRETS } from "../secrets";
import { apiAs, CHROMIUM, chromiumAvailable, launchChromium, SCREENSHOTS, shotAndAudit } from "./browser";
import { type DevServer, startWranglerDev } from "./wrangler-dev";

/**
 * A receiver's page in Debian's Chromium against `wrangler dev`, with a receiver of the test's own (a
 * Node server) that refused (503) while 5 runs completed: the dry run counts 5, the recovery's progress
 * bar reaches 5 of 5 delivered by itself (the page is never reloaded), and the receiver gets all 5 in
 * order (its concurrency set to 1, ordered); paused, a new run's delivery shows held on the page, and
 * resumed it is delivered. The page passes axe-core at 1280 and 390 px, without sideways scrolling at
 * 390. Skipped without Chromium unless REQUIRE_BROWSER=1 (as the other browser tests).
 */
const required = process.env.REQUIRE_BROWSER === "1";
const available = chromiumAvailable;
const LAPTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

describe.runIf(available || required)(
  "a receiver's page: recover with a progress bar that follows the task, pause and resume",
  () => {
    let dir: string;
    let server: DevServer;
    let peer: Server;
    let peerUrl: string;
    let browser: Browser;
    let page: Page;
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    /** The receiver refuses (503) while this is true. */
    let refusing = true;
    /** The message ids (webhook-id) the receiver took (a 2xx), in order of arrival. */
    const received: string[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "eg-receiver-page-"));
      mkdirSync(SCREENSHOTS, { recursive: true });
      // The app (`/run`) answers at once; the receiver (`/hook`) refuses while `refusing`, then takes every delivery.
      peer = createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          if (!req.url?.startsWith("/hook"))
            return void res.writeHead(200, { "Content-Type": "application/json" }).end('{"done":true}');
          if (refusing) return void res.writeHead(503).end();
          received.push(String(req.headers["webhook-id"]));
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => peer.listen(0, "127.0.0.1", resolve));
      peerUrl = `http://127.0.0.1:${(peer.address() as { port: number }).port}`;
      server = await startWranglerDev({ dir, secrets: TEST_SECRETS });
      browser = await launchChromium();
      page = await (await browser.newContext({ viewport: LAPTOP })).newPage();
      page.setDefaultTimeout(15_000);
    }, 300_000);

    afterAll(async () => {
      await browser?.close();
      await server?.stop();
      await new Promise((resolve) => peer?.close(resolve));
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const api = apiAs(() => server.url, admin);

    const shot = (name: string) => shotAndAudit(page, name);

    it("counts 5, recovers them with a bar that reaches 5 of 5 by itself, in order; paused, a delivery is held, resumed, delivered", async () => {
      expect(available, `${CHROMIUM} is missing (REQUIRE_BROWSER=1)`).toBe(true);
      const { project_id: projectId } = await api<{ project_id: string }>("POST", "/projects", {
        name: "Receiver page",
      });
      const { app_id: appId } = await api<{ app_id: string }>("POST", `/projects/${projectId}/apps`, {
        name: "hooked",
        region: "us-east-1",
        runtime: "cortex",
      });
      const { build_id } = await api<{ build_id: string }>("POST", `/projects/${projectId}/apps/${appId}/builds`, {});
      const build = `/projects/${projectId}/apps/${appId}/builds/${build_id}`;
      await api("PATCH", build, { status: "building" });
      await api("PATCH", build, { status: "succeeded", origin_url: `${peerUrl}/run` });
      const run = async () => {
        const response = await fetch(
          `${server.url}/v4/${projectId}/hooked/run?webhookEndpoint=${encodeURIComponent(`${peerUrl}/hook`)}`,
          {
            method: "POST",
            // Signed: each attempt carries its message id (webhook-id), by which the receiver's log is checked.
            headers: {
              Authorization: `Bearer ${admin}`,
              "Content-Type": "application/json",
              "X-Webhook-Secret": "receiver-page-secret",
            },
            body: JSON.stringify({ inputs: { n: 1 } }),
          },
        );
        expect(response.status, await response.text()).toBe(200);
      };
      const origin = peerUrl;
      const receiverApi = `/projects/${projectId}/webhook-receivers/${encodeURIComponent(origin)}`;
      type Listed = { data: { delivery_id: string; request_id: string; status: string }[] };
      const deliveries = (status: string) =>
        api<Listed>(
          "GET",
          `/projects/${projectId}/webhook-deliveries?limit=100&status=${status}&origin=${encodeURIComponent(origin)}`,
        );

      // The receiver refuses while 5 runs complete: their deliveries fail (3 attempts, about 5 s).
      for (let i = 0; i < 5; i++) await run();
      await expect.poll(async () => (await deliveries("failed")).data.length, { timeout: 30_000 }).toBe(5);
      // Oldest first: the order the recovery sends them in, and the one the receiver must see.
      const missed = (await deliveries("failed")).data.map((d) => d.request_id).reverse();
      refusing = false;
      // Ordered: each delivery's first attempt waits until the one before it settled.
      await api("PATCH", receiverApi, { concurrency: 1 });

      await page.goto(`${server.url}/dashboard/sign-in`);
      await page.getByLabel("Admin token").fill(admin);
      await page.getByRole("button", { name: "Sign in", exact: true }).click();
      await page.getByRole("heading", { name: "Projects" }).waitFor();
      // From the Receivers list, the origin leads to the receiver's page.
      await page.goto(`${server.url}/dashboard/projects/${projectId}/webhook-receivers`);
      await page.getByRole("link", { name: origin, exact: true }).click();
      await page.getByRole("heading", { name: `Receiver ${origin}` }).waitFor();
      expect(await page.locator("#failed-deliveries tbody tr").count()).toBe(5);

      // The dry run first: it counts 5 and sends nothing.
      await page.getByRole("button", { name: "Count failed deliveries" }).click();
      const card = page.locator("#task-card");
      await card.getByText(/5 failed deliveries made from .* can be sent again/).waitFor();
      expect(received).toEqual([]);
      await shot("95-receiver-count");

      // Then the recovery: the page follows it without being reloaded.
      await card.getByRole("button", { name: "Recover 5 deliveries" }).click();
      await card.getByRole("heading", { name: "Recovery" }).waitFor();
      const navigations: string[] = [];
      page.on("framenavigated", (frame) => {
        if (frame === page.mainFrame()) navigations.push(frame.url());
      });
      await page.evaluate(() => ((window as unknown as { kept: string }).kept = "this page"));
      await card.getByText("5 of 5 delivered").waitFor({ timeout: 30_000 });
      await page.locator("#task-card:not([data-running])").waitFor();
      expect(await page.locator("#task-card progress").evaluate((p: HTMLProgressElement) => [p.value, p.max])).toEqual([
        5, 5,
      ]);
      expect(await card.textContent()).toContain("finished");
      expect(await page.evaluate(() => (window as unknown as { kept?: string }).kept)).toBe("this page");
      expect(navigations, "the receiver's page was never reloaded").toEqual([]);
      expect(received, "every missed result, once each, oldest first").toEqual(missed);
      // Once the task is over, the page's state and figures are brought up to date as well: the
      // originals count as recovered, the receiver healthy.
      await expect
        .poll(() => page.locator("#receiver-figures").textContent())
        .toMatch(/Delivered\s*5\s*Failed\s*0.*Recovered\s*5/s);
      await page.locator("#receiver-state").getByText("Healthy").waitFor();
      await shot("96-receiver-recovered");

      // Pause: the page says so, and a new run's delivery is held and listed there.
      await page.getByRole("button", { name: "Pause", exact: true }).click();
      await page
        .locator("#receiver-state")
        .getByText(/Paused \(since/)
        .waitFor();
      // The pause was told to the receiver's lane before the page had its answer: the next delivery is held.
      await run();
      await expect
        .poll(
          async () => {
            await page.reload();
            return page.locator("#held-deliveries tbody tr").count();
          },
          { timeout: 20_000 },
        )
        .toBe(1);
      expect(await page.locator("#held-deliveries tbody tr").textContent()).toContain("Held");
      expect(received).toHaveLength(5);
      await shot("97-receiver-paused");

      // Resume: what was held is sent, followed on the page.
      await page.getByRole("button", { name: "Resume", exact: true }).click();
      await card.getByRole("heading", { name: "Sending what was held" }).waitFor();
      await card.getByText("1 of 1 delivered").waitFor({ timeout: 30_000 });
      await page.locator("#task-card:not([data-running])").waitFor();
      expect(received).toHaveLength(6);
      // Once over, the page's lists are brought up to date too: nothing is held any more.
      await page.locator("#held-deliveries").getByText("None: nothing is waiting for this receiver.").waitFor();
      await page.locator("#receiver-state").getByText("Active").waitFor();
      await shot("98-receiver-resumed");

      // At a phone's width: nothing scrolls sideways, and the audit passes.
      await page.setViewportSize(PHONE);
      await page.reload();
      expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(
        0,
      );
      await shot("99-phone-receiver");
      await page.setViewportSize(LAPTOP);
    }, 120_000);
  },
);
