import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { client } from "../../test/helpers";
import { DOWN, PEER, PEER_OTHER, receiver } from "../../test/peers";
import { projectWithRuns } from "../../test/usage-pages";
import { drive, runWithWebhook } from "../../test/webhooks";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

const rowOf = (html: string, origin: string) =>
  text(new RegExp(`<tr>(?:(?!</tr>).)*?${origin.replace(/[.:/]/g, "\\$&")}.*?</tr>`, "s").exec(html)?.[0] ?? "");

describe("dashboard Receivers page", () => {
  it("says how to ask for a webhook while no delivery exists, then shows each receiver origin's health", async () => {
    const p = await projectWithRuns(client());
    const v = visitor(p.api);
    await v.signIn();
    const page = `/dashboard/projects/${p.projectId}/webhook-receivers`;
    const empty = await v.get(page);
    expect(empty.status).toBe(200);
    expect(text(empty.html)).toContain("No webhook deliveries in this range.");
    expect(text(empty.html)).toContain("webhookEndpoint=");

    // One receiver takes its delivery at once, one after a retry (404 first), one cannot be reached at all.
    const steady = await receiver([{ status: 204 }]);
    const flaky = await receiver([{ status: 404 }, { status: 204 }], undefined, PEER_OTHER);
    for (const endpoint of [steady.url, flaky.url, `${DOWN}/hooks/gone`]) {
      const { messages } = await runWithWebhook(p.api, p.ok, endpoint);
      for (let i = 0; i < 3 && !(await drive(p.api, messages[0])).acked; i++);
    }

    const { html, status } = await v.get(page);
    expect(status).toBe(200);
    const steadyRow = rowOf(html, new URL(PEER).origin);
    expect(steadyRow).toContain("Healthy");
    expect(steadyRow).toMatch(/Healthy 1 delivered, 0 failed Pause 1 0 0 % [\d.]+ m?s none/);
    const flakyRow = rowOf(html, new URL(PEER_OTHER).origin);
    expect(flakyRow).toMatch(/Healthy 1 delivered, 0 failed Pause 1 0 100 %/);
    const downRow = rowOf(html, new URL(DOWN).origin);
    expect(downRow).toContain("Failing");
    expect(downRow).toContain("connection_failed (could not connect)");
    expect(downRow).toMatch(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    // Its failures are one click away, and so are pause and the recovery's count.
    expect(html).toContain(
      `href="/dashboard/projects/${p.projectId}/webhook-deliveries?status=failed&amp;origin=${encodeURIComponent(new URL(DOWN).origin)}"`,
    );
    expect(downRow).toContain("Count failed to recover");

    // The share as a picture too, named by its counts.
    expect(html).toContain('role="img" aria-label="0 delivered, 1 failed"');
    expect(html).toMatch(/aria-current="page"[^>]*>Receivers</);
    expect(html).toMatch(/<a href="[^"]*range=7d" aria-current="page">7 days<\/a>/);
    // Two hours on, the last hour holds none of these deliveries; the last 24 hours all three origins.
    p.api.clock.advance(2 * 3_600_000);
    expect(text((await v.get(`${page}?range=1h`)).html)).toContain("No webhook deliveries in this range.");
    expect(((await v.get(`${page}?range=24h`)).html.match(/<tr>/g) ?? []).length).toBe(1 + 3);
    // Pause from the page: the row says Paused, and Resume is offered.
    const control = `/dashboard/projects/${p.projectId}/webhook-receivers/control`;
    const paused = await v.post(control, { origin: new URL(PEER).origin, action: "pause", back: "list" });
    expect(paused.status).toBe(303);
    expect(paused.location).toBe(page);
    const after = await v.get(page);
    expect(rowOf(after.html, new URL(PEER).origin)).toMatch(/Paused paused .*Resume/);
    // Every project page says so at its top.
    const runsPage = await v.get(`/dashboard/projects/${p.projectId}/runs`);
    expect(text(runsPage.html)).toContain(`Webhook receiver ${new URL(PEER).origin} is paused.`);

    // The dry-run count, then its answer on the page.
    const counted = await v.post(control, {
      origin: new URL(DOWN).origin,
      action: "count",
      since: "2026-11-20T00:00:00Z",
    });
    expect(counted.status).toBe(303);
    // Its count is followed on the receiver's own page, which the row's origin links to.
    const receiverPage = `${page}/${encodeURIComponent(new URL(DOWN).origin)}`;
    expect(counted.location).toMatch(new RegExp(`^${receiverPage.replace(/[.?]/g, "\\$&")}\\?task=wrt_`));
    expect(html).toContain(`<a href="${receiverPage}"><code>${new URL(DOWN).origin}</code></a>`);
    const task = await v.get(counted.location!);
    expect(text(task.html)).toMatch(/Counting the failed deliveries|can be sent again/);
  });

  it("shows each receiver's concurrency and sets it with a small form; a value out of range is the API's problem, shown", async () => {
    const p = await projectWithRuns(client());
    const v = visitor(p.api);
    await v.signIn();
    const hook = await receiver([{ status: 204 }]);
    const { messages } = await runWithWebhook(p.api, p.ok, hook.url);
    for (let i = 0; i < 3 && !(await drive(p.api, messages[0])).acked; i++);
    const page = `/dashboard/projects/${p.projectId}/webhook-receivers`;
    const origin = new URL(PEER).origin;
    const before = await v.get(page);
    expect(before.html).toContain(`aria-label="Requests in flight at once to ${origin}"`);
    expect(before.html).toMatch(/name="concurrency"[^>]*value="6"/);

    const set = await v.post(`${page}/concurrency`, { origin, concurrency: "1" });
    expect(set.status).toBe(303);
    expect(set.location).toBe(page);
    const after = await v.get(page);
    expect(after.html).toMatch(/name="concurrency"[^>]*value="1"/);
    expect(rowOf(after.html, origin)).toContain("ordered");

    const refused = await v.post(`${page}/concurrency`, { origin, concurrency: "500" });
    expect(refused.status).toBe(400);
    expect(text(refused.html)).toContain("The concurrency was not set");
    expect((await v.get(page)).html).toMatch(/name="concurrency"[^>]*value="1"/);
  });
});
