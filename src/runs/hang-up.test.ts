import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type Client, client } from "../../test/helpers";
import { PEER, received, receiver } from "../../test/peers";
import { capturingQueue, lanesThat, seedRunnable } from "../../test/runs";
import { countInDeliveryStores, firstInDeliveryStores } from "../../test/delivery-stores";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** An outbound fetch that notes, when the upstream is called, whether the run's delivery is already on record. */
function watchingOutbound() {
  const calls: { url: string; method: string; recorded: boolean }[] = [];
  return {
    calls,
    async fetch(request: Request) {
      const runId = request.headers.get("x-run-id");
      const row = runId
        ? await firstInDeliveryStores("SELECT status FROM webhook_deliveries WHERE run_id = ?", [runId], runId)
        : null;
      calls.push({ url: request.url, method: request.method, recorded: row !== null });
      return fetch(request);
    },
  };
}

async function rowOf(runId: string) {
  return firstInDeliveryStores<{ status: string; last_error: string | null }>(
    "SELECT status, last_error FROM webhook_deliveries WHERE run_id = ?",
    [runId],
    runId,
  );
}

/** A run of `app` with a webhook, its queue captured, whose caller hangs up with `hangUp.abort()`; `start` sends it. */
async function hangingUpRun(api: Client, app: { runPath: string; token: string }) {
  const hook = await receiver();
  const capture = capturingQueue();
  const hangUp = new AbortController();
  const ctx = createExecutionContext();
  const request = new Request(`http://localhost${app.runPath}?webhookEndpoint=${encodeURIComponent(hook.url)}`, {
    headers: { Authorization: `Bearer ${app.token}` },
    signal: hangUp.signal,
  });
  return {
    hook,
    capture,
    hangUp,
    ctx,
    start: () => api.worker.fetch(request, { ...env, ...capture.bindings }, ctx),
  };
}

describe("a caller who hangs up mid-run", () => {
  it("still gets its delivery: the record exists before the upstream is called and the run is carried in waitUntil", async () => {
    const outbound = watchingOutbound();
    const api = client({ outbound });
    const app = await seedRunnable(api, `${PEER}/upstream/echo?delay=400`);
    const { capture, hangUp, ctx, start } = await hangingUpRun(api, app);
    // The caller never reads the answer and hangs up while the app is still working.
    void start().catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
    hangUp.abort();
    await waitOnExecutionContext(ctx);
    expect(outbound.calls).toHaveLength(1);
    expect(outbound.calls[0]!.recorded).toBe(true);
    expect(capture.sent).toHaveLength(1);
    const runId = (capture.sent[0] as { runId: string }).runId;
    expect(await rowOf(runId)).toMatchObject({ status: "pending" });
  });

  it("ends the record failed (run_interrupted), not absent, when the run outlives what the platform allows after the hang-up", async () => {
    // The 25 s after the hang-up pass at once on this clock.
    const api = client({ sleep: async () => undefined });
    const app = await seedRunnable(api, `${PEER}/upstream/echo?delay=3000`);
    const { hook, capture, hangUp, ctx, start } = await hangingUpRun(api, app);
    const started = Date.now();
    const answered = start();
    await new Promise((resolve) => setTimeout(resolve, 100));
    hangUp.abort();
    const response = await answered;
    const runId = response.headers.get("x-run-id")!;
    await waitOnExecutionContext(ctx);
    expect(Date.now() - started).toBeLessThan(2500);
    expect(capture.sent).toHaveLength(0);
    expect(await rowOf(runId)).toMatchObject({ status: "failed", last_error: "run_interrupted" });
    expect(await received(hook.key)).toHaveLength(0);
  });
});

describe("HEAD on a run path", () => {
  it.each(["", "/"])("answers 405 without calling the upstream or sending a webhook (path%s)", async (slash) => {
    const outbound = watchingOutbound();
    const api = client({ outbound });
    const app = await seedRunnable(api);
    const hook = await receiver();
    const capture = capturingQueue();
    const ctx = createExecutionContext();
    const response = await api.worker.fetch(
      new Request(`http://localhost${app.runPath}${slash}?webhookEndpoint=${encodeURIComponent(hook.url)}`, {
        method: "HEAD",
        headers: { Authorization: `Bearer ${app.token}` },
      }),
      { ...env, ...capture.bindings },
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(405);
    if (slash === "") expect(response.headers.get("allow")).toBe("GET, POST");
    expect(outbound.calls).toHaveLength(0);
    expect(capture.sent).toHaveLength(0);
    expect(
      await countInDeliveryStores("SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint = ?", [hook.url]),
    ).toBe(0);
  });
});

describe("another method on a run path", () => {
  it.each(["PUT", "DELETE", "PATCH"])(
    "%s answers 405 whose Allow offers GET and POST, not the HEAD runs refuse",
    async (method) => {
      const api = client();
      const app = await seedRunnable(api);
      const response = await api.worker.fetch(
        new Request(`http://localhost${app.runPath}`, { method, headers: { Authorization: `Bearer ${app.token}` } }),
        env,
        createExecutionContext(),
      );
      expect(response.status).toBe(405);
      expect(response.headers.get("allow")).toBe("GET, POST");
    },
  );
});

describe("the caller's answer and the delivery's hand-off", () => {
  it("answers the caller while the hand-off to the delivery's lane is still under way (spec 6: the delivery does not block the response)", async () => {
    const api = client();
    const app = await seedRunnable(api);
    let release!: () => void;
    const sending = new Promise<void>((resolve) => (release = resolve));
    const sent: unknown[] = [];
    const slowLane = lanesThat(async (messages) => {
      await sending;
      sent.push(...messages);
      return { stored: messages.map(() => true) };
    });
    const ctx = createExecutionContext();
    const request = new Request(
      `http://localhost${app.runPath}?webhookEndpoint=${encodeURIComponent(`${PEER}/hooks/slow-queue`)}`,
      {
        method: "POST",
        headers: { Authorization: `Bearer ${app.token}`, "Content-Type": "application/json" },
        body: "{}",
      },
    );
    const response = await api.worker.fetch(request, { ...env, WEBHOOK_LANES: slowLane }, ctx);
    expect(response.status).toBe(200);
    expect(sent).toHaveLength(0);
    release();
    await waitOnExecutionContext(ctx);
    expect(sent).toHaveLength(1);
  });
});
