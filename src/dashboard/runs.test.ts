import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { consume, startAsync } from "../../test/async-runs";
import { text, visitor } from "../../test/dashboard-helpers";
import { client } from "../../test/helpers";
import { projectWithRuns } from "../../test/usage-pages";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

const rowIds = (html: string) => [...html.matchAll(/<tr id="run-([^"]+)"/g)].map((m) => m[1]!);

describe("dashboard Runs page", () => {
  it("says how to make a first run while there is none, and shows async runs still under way", async () => {
    const p = await projectWithRuns(client());
    const v = visitor(p.api);
    await v.signIn();
    const page = await v.get(`/dashboard/projects/${p.projectId}/runs`);
    expect(page.status).toBe(200);
    expect(text(page.html)).toContain("No runs yet.");
    expect(text(page.html)).toContain(
      `curl -X POST &quot;http://localhost/v4/${p.projectId}/${p.ok.appName}/run&quot;`,
    );
    expect(page.html).toMatch(/aria-current="page"[^>]*>Runs</);
    expect(text(page.html)).not.toContain("Under way");

    // A run not yet ended is on no record yet: it shows as under way, above the list (an async one here;
    // a synchronous one in src/usage/under-way.test.ts and the browser test).
    const queued = await startAsync(p.api, p.ok);
    const later = text((await v.get(`/dashboard/projects/${p.projectId}/runs`)).html);
    expect(later).toMatch(new RegExp(`Under way ${queued.body.run_id} ${p.ok.appName} async since .* UTC \\(`));
    expect(later).toContain("No runs yet.");
    // Followed live by the page's script (its events are the API's stream, passed on).
    expect(later).toContain("Live: runs appear as they start and end");
    expect(page.html).toContain(`data-live="/dashboard/projects/${p.projectId}/runs/events"`);
  });

  it("lists every run of every mode, newest first, page by page, filtered by app, mode, status class and time", async () => {
    const p = await projectWithRuns(client());
    const v = visitor(p.api);
    await v.signIn();
    const path = `/dashboard/projects/${p.projectId}/runs`;
    const okIds = await p.run(p.ok, 24);
    p.api.clock.advance(1000);
    const brokenIds = await p.run(p.broken, 2);
    const started = await startAsync(p.api, p.ok);
    await consume(p.api, started.message);

    // 27 runs: a page of 25, newest first, then the rest behind the API's cursor.
    const first = await v.get(path);
    const shown = rowIds(first.html);
    expect(shown).toHaveLength(25);
    expect(shown.slice(0, 3)).toEqual([started.body.run_id, brokenIds[1], brokenIds[0]]);
    const next = /href="([^"]*cursor=[^"]+)">Next page/.exec(first.html)?.[1]?.replaceAll("&amp;", "&");
    expect(next).toBeDefined();
    const second = await v.get(next!);
    expect(rowIds(second.html)).toEqual(okIds.slice(0, 2).reverse());
    expect(second.html).not.toContain("Next page");
    const row = text(/<tr id="run-[^"]+">.*?<\/tr>/s.exec(first.html)![0]);
    expect(row).toMatch(new RegExp(`${p.ok.appName} async POST /run 200 [\\d.]+ m?s`));
    // The caller by name (the service account's), its id on hover and for screen readers.
    const caller = /<span class="caller" title="([^"]+)">([^<]+)<span class="skip"> \(([^)]+)\)/.exec(first.html);
    expect(caller?.[1]).toMatch(/^sa:sa_\w+$/);
    expect(caller?.[2]).toMatch(/^key “.+”$/);
    expect(caller?.[3]).toBe(caller?.[1]);
    // Every run id leads to its own page.
    expect(first.html).toContain(`href="/dashboard/projects/${p.projectId}/runs/${started.body.run_id}"`);

    // Status class: the broken app's two runs, the filter kept in the form and across pages.
    const failed = await v.get(`${path}?status=5xx`);
    expect(rowIds(failed.html)).toEqual([brokenIds[1], brokenIds[0]]);
    expect(failed.html).toContain('<option value="5xx" selected="">');
    expect(text(failed.html)).toContain("Show all");
    // By app, and by mode.
    expect(rowIds((await v.get(`${path}?app_name=${p.broken.appName}`)).html)).toEqual([brokenIds[1], brokenIds[0]]);
    expect(rowIds((await v.get(`${path}?mode=async`)).html)).toEqual([started.body.run_id]);
    const paged = await v.get(`${path}?mode=sync&status=2xx`);
    expect(rowIds(paged.html)).toHaveLength(24);
    // Time: two hours on, the last hour holds none of them; the last 24 hours all.
    p.api.clock.advance(2 * 3_600_000);
    expect(text((await v.get(`${path}?range=1h`)).html)).toContain("No runs match these filters.");
    expect(rowIds((await v.get(`${path}?range=24h&status=5xx`)).html)).toHaveLength(2);
    // Anything else in the URL is no filter at all, never passed on to the API as it is.
    expect(rowIds((await v.get(`${path}?status=oops&mode=both&range=forever`)).html)).toHaveLength(25);
  });
});

describe("dashboard run page", () => {
  it("shows an async run's record, timeline and stored result, reached from the list", async () => {
    const p = await projectWithRuns(client());
    const v = visitor(p.api);
    await v.signIn();
    const started = await startAsync(p.api, p.ok);
    const id = started.body.run_id;
    const page = `/dashboard/projects/${p.projectId}/runs/${id}`;

    // Queued: no record yet, its state and an empty result so far.
    const queued = await v.get(page);
    expect(queued.status).toBe(200);
    const before = text(queued.html);
    expect(before).toContain("Not on record yet");
    expect(before).toMatch(/Timeline Accepted \+0 ms/);
    expect(before).toContain("No result yet");

    await consume(p.api, started.message);
    const done = await v.get(page);
    const shown = text(done.html);
    expect(shown).toMatch(
      new RegExp(
        `Outcome 200 the app answered, and its answer reached its end App and request ${p.ok.appName} POST /run Mode async`,
      ),
    );
    expect(shown).toMatch(/Accepted \+0 ms .* App called \+[\d.]+ m?s .* Ended \+[\d.]+ m?s/);
    expect(shown).toContain("State succeeded answered 200");
    expect(done.html).toContain(`&quot;run_id&quot;: &quot;${id}&quot;`);
    expect(shown).toContain("No webhook was asked for this run.");
  });

  it("says whose failure a failed run was, and answers 404 for a run the project does not have", async () => {
    const p = await projectWithRuns(client());
    const v = visitor(p.api);
    await v.signIn();
    const [broken] = await p.run(p.broken, 1);
    const page = await v.get(`/dashboard/projects/${p.projectId}/runs/${broken}`);
    expect(page.status).toBe(200);
    const shown = text(page.html).replaceAll("&#39;", "'");
    expect(shown).toMatch(
      /Outcome 500 the app's own 500 the app answered, and its answer reached its end App and request/,
    );
    expect(shown).toMatch(/Accepted \+0 ms .* App called \+\d+ ms .* App answered \+\d+ ms .* Ended \+\d+ ms/);
    const missing = await v.get(`/dashboard/projects/${p.projectId}/runs/run_${"0".repeat(30)}`);
    expect(missing.status).toBe(404);
    expect(text(missing.html)).toContain("No run with this id in the project.");
  });
});
