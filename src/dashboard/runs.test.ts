import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { consume, gatedOutbound, startAsync } from "../../test/async-runs";
import { text, visitor } from "../../test/dashboard-helpers";
import { client } from "../../test/helpers";
import { PEER } from "../../test/peers";
import { seedRunnable } from "../../test/runs";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe("dashboard Runs page", () => {
  it("lists async runs newest first with status, duration and a link to their deliveries", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const v = visitor(api);
    await v.signIn();
    const page = `/dashboard/projects/${app.projectId}/runs`;
    const empty = await v.get(page);
    expect(empty.status).toBe(200);
    expect(text(empty.html)).toContain("No async runs yet");

    const hooked = await startAsync(api, app, { query: `webhookEndpoint=${encodeURIComponent(`${PEER}/hooks/dash`)}` });
    const upstream = gatedOutbound();
    upstream.hold();
    const consumed = consume(api, hooked.message, { deps: { outbound: upstream.outbound } });
    await upstream.reached;
    api.clock.advance(2_500);
    upstream.release();
    await consumed;
    const queued = await startAsync(api, app);

    const { html } = await v.get(page);
    const shown = text(html);
    expect(shown.indexOf(queued.body.run_id)).toBeLessThan(shown.indexOf(hooked.body.run_id));
    expect(shown).toContain("Succeeded");
    expect(shown).toContain("2.5 s");
    expect(shown).toContain("HTTP 200");
    expect(shown).toContain("Queued");
    expect(html).toContain(`/dashboard/projects/${app.projectId}/webhook-deliveries?run_id=${hooked.body.run_id}`);
    expect(html).toMatch(/aria-current="page"[^>]*>Runs</);

    const filtered = text((await v.get(`${page}?status=queued`)).html);
    expect(filtered).toContain(queued.body.run_id);
    expect(filtered).not.toContain(hooked.body.run_id);
  });

  it("answers 404 for a project that does not exist", async () => {
    const api = client();
    const v = visitor(api);
    await v.signIn();
    const res = await v.get(`/dashboard/projects/proj_${"0".repeat(30)}/runs`);
    expect(res.status).toBe(404);
  });
});
