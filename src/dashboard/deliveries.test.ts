import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { client, testDeps } from "../../test/helpers";
import { DOWN, receiver } from "../../test/peers";
import { capturingQueue, seedRunnable } from "../../test/runs";
import { drive, runWithWebhook } from "../../test/webhooks";
import { createScope } from "../platform/scope";
import { handNewDeliveryToLane } from "../webhooks/enqueue";

// Failed deliveries log an error line by design.
beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A run of a deployed app with a webhook to a real local receiver, delivered as the queue would. */
async function deliveredRun(
  api: ReturnType<typeof client>,
  app: Awaited<ReturnType<typeof seedRunnable>>,
  endpoint: string,
) {
  const run = await runWithWebhook(api, app, endpoint);
  expect(run.response.status).toBe(200);
  await drive(api, run.messages[0]);
  return JSON.parse(run.text).run_id as string;
}

describe("dashboard webhook deliveries", () => {
  it("lists deliveries with status, every attempt and the last outcome", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const v = visitor(api);
    await v.signIn();
    const page = `/dashboard/projects/${app.projectId}/webhook-deliveries`;
    expect(text((await v.get(page)).html)).toContain("No webhook deliveries yet");

    const ok = await receiver([{ status: 200 }]);
    const delivered = await deliveredRun(api, app, ok.url);
    const flaky = await receiver([{ status: 404 }, { status: 204 }]);
    const retried = await deliveredRun(api, app, flaky.url);
    const refused = await receiver([{ status: 410 }]);
    const failed = await deliveredRun(api, app, refused.url);
    const down = await deliveredRun(api, app, `${DOWN}/hook`);

    const list = await v.get(page);
    expect(list.status).toBe(200);
    const rows = list.html.split('<tr id="delivery-').slice(1);
    const row = (runId: string) => text(rows.find((r) => r.includes(`run_id=${runId}"`)) ?? "");
    expect(row(delivered)).toMatch(/Delivered .*#1 2026-11-21 \d\d:\d\d:\d\d UTC : HTTP 200, \d+ ms.* HTTP 200/);
    expect(row(retried)).toMatch(/Delivered .*#1 .*HTTP 404, \d+ ms .*#2 .*HTTP 204, \d+ ms/);
    expect(row(failed)).toMatch(/Failed .*#1 .*HTTP 410/);
    expect(row(down)).toContain("connection_failed (could not connect)");
    expect(list.html).toContain(ok.url);
    expect(text(list.html)).toContain("unsigned");
  });

  it("resends a settled delivery with its Resend button and says under which id", async () => {
    const sent: unknown[] = [];
    const api = client({}, capturingQueue(sent).bindings);
    const app = await seedRunnable(api);
    const v = visitor(api);
    await v.signIn();
    const hook = await receiver([{ status: 200 }]);
    await deliveredRun(api, app, hook.url);
    const page = `/dashboard/projects/${app.projectId}/webhook-deliveries`;
    const list = await v.get(page);
    const action = /<form method="post" action="([^"]+\/resend)"/.exec(list.html)?.[1];
    expect(action).toBeDefined();
    const posted = await v.post(action!, {});
    expect(posted.status).toBe(303);
    expect(posted.location).toMatch(/webhook-deliveries\?resent=whd_/);
    const after = await v.get(posted.location!);
    expect(text(after.html)).toMatch(/Resent as whd_/);
    expect(text(after.html)).toMatch(/resends whd_/);
    expect(sent.length).toBeGreaterThanOrEqual(1);
  });

  it("filters by run id with a GET form that keeps the run id, and explains a refused one", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }]);
    const first = await deliveredRun(api, app, hook.url);
    const second = await deliveredRun(api, app, hook.url);
    const v = visitor(api);
    await v.signIn();
    const page = `/dashboard/projects/${app.projectId}/webhook-deliveries`;
    const form = await v.get(page);
    expect(form.html).toMatch(/<form method="get" action="[^"]+webhook-deliveries" class="filter" role="search"/);
    const filtered = await v.get(`${page}?run_id=${first}`);
    expect(filtered.html).toContain(`name="run_id" type="text" value="${first}"`);
    expect(filtered.html).toContain(`run_id=${first}"`);
    expect(filtered.html).not.toContain(`run_id=${second}"`);
    expect(text(filtered.html)).toContain("Show all");
    expect(text((await v.get(`${page}?run_id=run_nothing`)).html)).toContain("No deliveries for this run.");

    const long = "r".repeat(65);
    const refused = await v.get(`${page}?run_id=${long}`);
    expect(refused.status).toBe(400);
    expect(refused.html).toContain(`value="${long}"`);
    expect(refused.html).toMatch(/id="field-run_id"[^>]*aria-invalid="true"/);
    expect(text(refused.html)).toContain("Loading deliveries: Validation failed.");
    expect(refused.html).not.toContain('"type":');
  });

  it("pages with the API's cursor and keeps the run filter on the next page", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const capture = capturingQueue();
    const testEnv = { ...env, ...capture.bindings } as unknown as Env;
    const scope = { ...createScope(testEnv, createExecutionContext(), testDeps({ now: api.clock.now })) };
    const ids: string[] = [];
    for (let i = 0; i < 21; i++) {
      api.clock.advance(1000); // ids sort by creation time
      const request = {
        projectId: app.projectId,
        runId: "run_paged",
        endpoint: "https://hooks.example/x",
        secret: undefined,
        body: "{}",
      };
      ids.push(await handNewDeliveryToLane(scope, request));
    }
    const v = visitor(api);
    await v.signIn();
    const page = `/dashboard/projects/${app.projectId}/webhook-deliveries`;
    const one = await v.get(`${page}?run_id=run_paged`);
    expect(one.html).toContain(ids[20]!);
    expect(one.html).not.toContain(ids[0]!);
    expect(text(one.html)).toContain("Pending");
    const next = /href="([^"]+)">Next page/.exec(one.html)?.[1]?.replace(/&amp;/g, "&");
    expect(next).toMatch(/\?run_id=run_paged&cursor=/);
    const two = await v.get(next!);
    expect(two.html).toContain(ids[0]!);
    expect(two.html).not.toContain("Next page");
    const bad = await v.get(`${page}?cursor=nonsense`);
    expect(text(bad.html)).toContain("The cursor is not one this API issued.");
  });
});
