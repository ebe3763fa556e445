import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client, testDeps } from "../../test/helpers";
import { capturingQueue, seedRunnable } from "../../test/runs";
import { newId } from "../platform/ids";
import { createScope } from "../platform/scope";
import type { RunAnswer } from "./answer";
import { startWebhook } from "./webhook";
import { firstInDeliveryStores } from "../../test/delivery-stores";

// The hand-on stage alone (startWebhook → RunWebhook): the local D1 holds the record, the queue is
// captured, and the work the stage leaves in `waitUntil` is awaited here. No app, no caller.
const api = client();

async function stage(request = new Request("https://gateway.test/v4/p/a/run")) {
  const app = await seedRunnable(api);
  const queue = capturingQueue();
  const left: Promise<unknown>[] = [];
  // The grace after a hang-up passes at once.
  const scope = createScope(
    { ...env, ...queue.bindings },
    { waitUntil: (work) => void left.push(work) },
    testDeps({ sleep: async () => undefined }),
  );
  const runId = newId("run");
  const webhook = await startWebhook(scope, request, {
    runId,
    projectId: app.projectId,
    appName: app.appName,
    webhook: { endpoint: "https://hooks.example/in", secret: null },
  });
  const row = () =>
    firstInDeliveryStores<{ status: string; last_error: string | null }>(
      "SELECT status, last_error FROM webhook_deliveries WHERE run_id = ?",
      [runId],
      runId,
    );
  return { webhook, queue, row, settled: () => Promise.all(left) };
}

const answer: RunAnswer = {
  status: 200,
  text: '{"run_id":"run_x","result":{"ok":true}}',
  contentType: "application/json",
  failure: null,
};

describe("the hand-on stage (startWebhook → RunWebhook)", () => {
  it("puts the delivery on record before the app is called, and hands the whole answer's copy to the queue once it is whole", async () => {
    const { webhook, queue, row, settled } = await stage();
    expect(await row()).toMatchObject({ status: "pending" });
    expect(queue.sent).toEqual([]);
    webhook.carry(Promise.resolve(answer));
    await settled();
    expect(queue.sent).toHaveLength(1);
    expect(JSON.stringify(queue.sent[0])).toContain("run_x");
  });

  it("settles the record failed (run_interrupted), never absent, when the answer broke", async () => {
    const { webhook, queue, row, settled } = await stage();
    webhook.carry(Promise.reject(new Error("the app's answer broke off")));
    await settled();
    expect(queue.sent).toEqual([]);
    expect(await row()).toMatchObject({ status: "failed", last_error: "run_interrupted" });
  });

  it("ends the app's call once the caller has been gone longer than the platform allows, and settles the record", async () => {
    const hungUp = new AbortController();
    hungUp.abort();
    const { webhook, queue, row, settled } = await stage(
      new Request("https://gateway.test/v4/p/a/run", { signal: hungUp.signal }),
    );
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(webhook.signal.aborted).toBe(true);
    webhook.carry(Promise.resolve(answer));
    await settled();
    expect(queue.sent).toEqual([]);
    expect(await row()).toMatchObject({ status: "failed", last_error: "run_interrupted" });
  });
});
