import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { expect } from "vitest";

/**
 * What the browser tests share: Debian's Chromium (or CHROMIUM_PATH; without it the suites are skipped
 * unless REQUIRE_BROWSER=1), a screenshot for CI's artifacts with an axe-core audit of the page as shown,
 * and the operator's calls to the API of the `wrangler dev` under test.
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const chromiumAvailable = existsSync(CHROMIUM);
export const SCREENSHOTS = join(process.cwd(), "artifacts", "screenshots");
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export const launchChromium = (): Promise<Browser> =>
  chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu"] });

/** A full-page screenshot named `name`, and an axe-core audit (WCAG 2 A and AA: labels, contrast, roles…) that must find nothing. */
export async function shotAndAudit(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  // Evaluated through the DevTools protocol, which the page's CSP does not govern; the page itself stays strict.
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const result = await (
      window as unknown as {
        axe: { run(options: object): Promise<{ violations: { id: string; nodes: { target: unknown }[] }[] }> };
      }
    ).axe.run({ runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } });
    return result.violations.map((v) => `${v.id}: ${JSON.stringify(v.nodes.map((n) => n.target))}`);
  });
  expect(violations, `accessibility of ${name}`).toEqual([]);
}

/** `/v2` of the gateway at `url` as the bearer of `token`: the parsed answer, or an error that says the status and the problem. */
export const apiAs =
  (url: () => string, token: string) =>
  async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const response = await fetch(`${url()}/v2${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return JSON.parse(text) as T;
  };
