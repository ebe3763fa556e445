import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { client } from "../../test/helpers";
import { projectWithRuns } from "../../test/usage-pages";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe("dashboard Usage pages", () => {
  it("says how to make a first run, then shows the project's runs as totals and charts, and each app its own", async () => {
    const p = await projectWithRuns(client());
    const v = visitor(p.api);
    await v.signIn();
    const usage = `/dashboard/projects/${p.projectId}/usage`;

    const quiet = await v.get(`/dashboard/projects/${p.projectId}/apps`);
    expect(text(quiet.html)).toContain("no runs in 7 days");
    // By default the page opens where the runs are: with none in 7 days it says so.
    const empty = await v.get(usage);
    expect(empty.status).toBe(200);
    expect(text(empty.html)).toContain("No runs in the last 7 days.");
    expect(empty.html).toMatch(/<a href="[^"]*range=fit" aria-current="page">Where the runs are<\/a>/);
    expect(text((await v.get(`${usage}?range=24h`)).html)).toContain("No runs in this range.");
    expect(text(empty.html)).toContain(`curl -X POST &quot;http://localhost/v4/${p.projectId}/APP_NAME/run&quot;`);
    expect(empty.html).toMatch(/aria-current="page"[^>]*>Usage</);

    await p.run(p.ok, 3);
    await p.run(p.broken, 2);

    const page = await v.get(`${usage}?range=1h`);
    expect(page.status).toBe(200);
    const shown = text(page.html);
    expect(shown).toContain("Runs 5 ");
    // The broken app's 5xx are its own failures; no caller's mistake counts against it.
    expect(shown).toContain("App error rate 40 % 2 the app&#39;s");
    expect(shown).toContain("Failures 2 0 caller&#39;s · 0 gateway&#39;s");
    expect(shown).toContain(
      "2 failures in the last 1 hour: 2 the app&#39;s (error rate 40 %), 0 the caller&#39;s mistakes, 0 the gateway&#39;s.",
    );
    expect(page.html).toMatch(/<a href="[^"]*range=1h" aria-current="page">1 hour<\/a>/);
    // The charts are images named by their caption and a summary of the same figures.
    expect(page.html).toContain('role="img" aria-labelledby="project-runs-title project-runs-desc"');
    expect(page.html).toContain('<desc id="project-runs-desc">5 runs in the last 1 hour: 3 2xx, 0 4xx, 2 5xx.</desc>');
    expect(page.html).toContain('aria-labelledby="project-latency-title project-latency-desc"');
    // 1 hour is sixty one-minute bars (in the runs, failures and latency charts); the runs all fall in the last one.
    expect(page.html.match(/<rect class="hit"/g)?.length).toBe(3 * 60);
    // One 5xx bar in the runs chart, one bar of the app's failures in the failures chart.
    expect(page.html.match(/<rect class="tone-c5xx"/g)).toHaveLength(2);

    // The broken app's page shows its own runs only.
    const app = await v.get(`/dashboard/projects/${p.projectId}/apps/${p.broken.appId}?range=1h`);
    expect(app.status).toBe(200);
    expect(app.html).toContain('<desc id="app-runs-desc">2 runs in the last 1 hour: 0 2xx, 0 4xx, 2 5xx.</desc>');
    expect(text(app.html)).toContain(`Every run of ${p.broken.appName}`);
    expect(text(app.html)).toContain("Builds");

    // By default: where the runs are, by the minute, at least 15 minutes wide (not one bar at a day's edge).
    const fitted = await v.get(usage);
    expect(fitted.html).toMatch(
      /<desc id="project-runs-desc">5 runs since \d\d:\d\d UTC: 3 2xx, 0 4xx, 2 5xx\.<\/desc>/,
    );
    expect(fitted.html.match(/<rect class="hit"/g)?.length).toBe(3 * 15);

    // The list of apps: each app's figures over the same window, as bars and in words.
    const list = await v.get(`/dashboard/projects/${p.projectId}/apps`);
    const rowOf = (name: string) =>
      text(new RegExp(`<tr>(?:(?!</tr>).)*?>${name}</a>.*?</tr>`, "s").exec(list.html)?.[0] ?? "");
    expect(rowOf(p.ok.appName)).toMatch(/3 runs, 0 errors, p95 \d+ ms/);
    expect(rowOf(p.broken.appName)).toMatch(/2 runs, 2 errors, p95 \d+ ms/);
    expect(list.html).toMatch(
      /role="img" aria-label="Runs per minute since \d\d:\d\d UTC: 2 runs, 2 errors, p95 \d+ ms"/,
    );
    expect(list.html.match(/<svg class="spark"/g)).toHaveLength(2);

    // 7 days: 168 hourly buckets, the same totals.
    const week = await v.get(`${usage}?range=7d`);
    expect(week.html.match(/<rect class="hit"/g)?.length).toBe(3 * 168);
    expect(week.html).toContain("5 runs in the last 7 days");
  });

  it("answers 404 for a project that does not exist", async () => {
    const p = await projectWithRuns(client());
    const v = visitor(p.api);
    await v.signIn();
    for (const page of ["usage", "runs", "webhook-receivers"]) {
      expect((await v.get(`/dashboard/projects/proj_${"0".repeat(30)}/${page}`)).status, page).toBe(404);
    }
  });
});
