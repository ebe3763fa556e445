import { env, exports } from "cloudflare:workers";
import type { z } from "@hono/zod-openapi";
import { describe, expect, it, vi } from "vitest";
import { consume, keptRows, startAsync } from "../../test/async-runs";
import { world } from "../../test/cron-world";
import { addDomain, uniqueLabel, validate } from "../../test/domains";
import { client, type Client } from "../../test/helpers";
import { PEER, receiver, releaseStream, watchKey, watchState, whenClosed } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import { drive, runWithWebhook } from "../../test/webhooks";
import { type RunRecordSchema } from "./routes";

/** Runs on record from every entry and of every kind: custom domains, streams, hang-ups, async runs, webhooks. */

/** What the API answers for each run: its own response schema. */
type RunItem = z.infer<typeof RunRecordSchema>;

async function runsOf(api: Client, app: { projectId: string; token: string }, query = "") {
  const res = await api.json<{ data: RunItem[] }>(`/v2/projects/${app.projectId}/runs${query}`, { token: app.token });
  expect(res.status).toBe(200);
  return res.body.data;
}

/** The record of a passed-through run leaves when its body ended, after the response: waited for by polling the API. */
const eventually = <T>(read: () => Promise<T[]>, length = 1) =>
  vi.waitFor(
    async () => {
      const items = await read();
      expect(items).toHaveLength(length);
      return items;
    },
    { timeout: 3000, interval: 20 },
  );

describe("runs on record from every entry", () => {
  it("records a run made on a validated custom domain like one on the API hostname", async () => {
    const w = world();
    const app = await seedRunnable(w.api);
    const host = `${uniqueLabel("usage")}.example.test`;
    w.dns.set(host, "ok");
    await addDomain(w.api, app, host);
    expect((await validate(w.api, app, host)).body.status).toBe("validated");
    const onDomain = await w.api.call(app.runPath, { token: app.token, host });
    expect(onDomain.status).toBe(200);
    await onDomain.text();
    const [item] = await runsOf(w.api, app);
    expect(item).toMatchObject({ run_id: onDomain.headers.get("x-run-id"), status_code: 200, mode: "sync" });
  });

  it("records a passed-through stream once its body ended: the bytes that crossed and the time to the first", async () => {
    const api = client();
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const res = await api.call(`${app.appPath}/v1/stream?events=3`, {
      token: app.token,
      headers: { Accept: "text/event-stream" },
    });
    const body = await res.text();
    const [item] = await eventually(() => runsOf(api, app));
    expect(item).toMatchObject({
      run_id: res.headers.get("x-run-id"),
      path: "v1/stream",
      status_code: 200,
      hung_up: false,
      bytes_out: new TextEncoder().encode(body).byteLength,
    });
    expect(item!.ttfb_ms).not.toBeNull();
  });

  it("records a caller who hung up mid-stream, with what had crossed until then", async () => {
    const api = client();
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const key = watchKey();
    const hangUp = new AbortController();
    const res = await api.worker.fetch(
      new Request(`http://localhost${app.appPath}/events?events=3&hold=${key}`, {
        headers: { Authorization: `Bearer ${app.token}` },
        signal: hangUp.signal,
      }),
      env,
      { waitUntil: () => undefined, passThroughOnException: () => undefined, props: {} } as unknown as ExecutionContext,
    );
    const reader = res.body!.getReader();
    const first = await reader.read();
    hangUp.abort();
    await reader.cancel();
    await releaseStream(key);
    const [item] = await eventually(() => runsOf(api, app));
    expect(item).toMatchObject({
      run_id: res.headers.get("x-run-id"),
      hung_up: true,
      bytes_out: first.value!.byteLength,
    });
  });

  it("records a caller who hangs up before the app answered, through the Worker's own entry: the runtime cancels the request's pending work, and the run still ends hung_up", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?delay=10000&watch=${key}`);
    const hangUp = new AbortController();
    // `exports.default` is the Worker as `wrangler dev` serves it: an aborted request is a dropped
    // client, so workerd aborts `request.signal` and cancels what the request was waiting on.
    const dropped = exports.default
      .fetch(
        new Request(`http://localhost${app.runPath}`, {
          headers: { Authorization: `Bearer ${app.token}` },
          signal: hangUp.signal,
        }),
      )
      .catch((error: unknown) => error);
    await vi.waitFor(async () => expect((await watchState(key)).arrived).toBe(true), { timeout: 10_000, interval: 20 });
    hangUp.abort();
    await dropped;
    // The app's call ended with the caller, long before the app would have answered.
    expect((await whenClosed(key)).closed).toBe(true);
    const [item] = await eventually(() => runsOf(api, app));
    expect(item).toMatchObject({
      status_code: 499,
      ending: "hung_up",
      failure: null,
      hung_up: true,
      timed_out: false,
      times: { answered_ms: null },
      bytes_out: 0,
    });
    expect(item!.times.called_ms).not.toBeNull();
  });

  it("records a caller who hangs up mid-stream, through the Worker's own entry: the run's end outlives the cancelled answer", async () => {
    const api = client();
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const key = watchKey();
    const hangUp = new AbortController();
    // As `npm run dev` serves it: the client goes once the answer has begun, workerd cancels the
    // answer's body, and the run's end (which follows that body) must still be held by the invocation.
    const res = await exports.default.fetch(
      new Request(`http://localhost${app.appPath}/events?events=3&hold=${key}`, {
        headers: { Authorization: `Bearer ${app.token}` },
        signal: hangUp.signal,
      }),
    );
    const reader = res.body!.getReader();
    const first = await reader.read();
    hangUp.abort();
    await reader.cancel().catch(() => undefined);
    await releaseStream(key);
    const [item] = await eventually(() => runsOf(api, app));
    expect(item).toMatchObject({
      run_id: res.headers.get("x-run-id"),
      ending: "hung_up",
      hung_up: true,
      bytes_out: first.value!.byteLength,
    });
  });

  it("records a hang-up whose body was cancelled before the caller's signal aborted", async () => {
    const api = client();
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const key = watchKey();
    const res = await api.worker.fetch(
      new Request(`http://localhost${app.appPath}/events?events=3&hold=${key}`, {
        headers: { Authorization: `Bearer ${app.token}` },
      }),
      env,
      {
        waitUntil: () => undefined,
        passThroughOnException: () => undefined,
        props: {},
      } as unknown as ExecutionContext,
    );
    const reader = res.body!.getReader();
    const first = await reader.read();
    await reader.cancel();
    await releaseStream(key);
    const [item] = await eventually(() => runsOf(api, app));
    expect(item).toMatchObject({
      run_id: res.headers.get("x-run-id"),
      hung_up: true,
      bytes_out: first.value!.byteLength,
    });
  });

  it("records an async run when it finishes, with its status URL", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app, { body: { n: 1 } });
    expect(started.response.status).toBe(202);
    // Accepted is not finished: nothing on record yet.
    expect(await runsOf(api, app)).toEqual([]);
    await consume(api, started.message);
    const [item] = await runsOf(api, app, "?mode=async");
    expect(item).toMatchObject({
      run_id: started.body.run_id,
      mode: "async",
      status_code: 200,
      path: "run",
      bytes_in: JSON.stringify({ n: 1 }).length,
      status_url: started.body.status_url,
      caller: `sa:${app.serviceAccountId}`,
    });
    expect(item!.bytes_out).toBeGreaterThan(0);
  });

  it("records an async run whose consumer died mid-run when its redelivered message ends it interrupted (502), once", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    expect(await keptRows(started.body).claim(started.body.run_id, "msg-died", api.clock.now())).toBeDefined();
    expect((await consume(api, started.message, { id: "msg-died", attempts: 2 })).acked).toBe(true);
    await consume(api, started.message, { id: "msg-died", attempts: 3 });
    expect(await runsOf(api, app)).toMatchObject([
      { run_id: started.body.run_id, mode: "async", status_code: 502, timed_out: false },
    ]);
  });

  it("shows the webhook's outcome with the run, and counts its delivery in the usage figures and the receiver's health", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 500 }]);
    // Off the interval's edges, so the delivery's bucket is a fraction of the interval away from `from`.
    api.clock.advance(23 * 60_000 + 1_234);
    const { response, messages } = await runWithWebhook(api, app, hook.url);
    expect(response.status).toBe(200);
    const [pending] = await runsOf(api, app);
    expect(pending!.webhook).toMatchObject({ status: "pending", attempts: 0 });
    expect((await drive(api, messages[0])).acked).toBe(true);
    const [settled] = await runsOf(api, app);
    expect(settled!.webhook).toMatchObject({
      delivery_id: pending!.webhook!.delivery_id,
      status: "failed",
      attempts: 1,
    });

    const usage = await api.json<{ totals: Record<string, number> }>(
      `/v2/projects/${app.projectId}/usage?app_name=${app.appName}`,
      { token: app.token },
    );
    expect(usage.body.totals).toMatchObject({ runs: 1, deliveries_delivered: 0, deliveries_failed: 1 });
    const byMinute = await api.json<{ series: Record<string, number>[] }>(
      `/v2/projects/${app.projectId}/usage?interval=minute&from=${new Date(api.clock.now().getTime() - 600_000).toISOString()}`,
      { token: app.token },
    );
    expect(byMinute.body.series.filter((p) => p.runs !== 0 || p.deliveries_failed !== 0)).toMatchObject([
      { runs: 1, deliveries_failed: 1 },
    ]);
    const other = await api.json<{ totals: Record<string, number> }>(
      `/v2/projects/${app.projectId}/usage?app_name=nothing-here`,
      { token: app.token },
    );
    expect(other.body.totals).toMatchObject({ runs: 0, deliveries_failed: 0 });

    const health = await api.json<{ data: Record<string, unknown>[] }>(
      `/v2/projects/${app.projectId}/webhook-receivers`,
      { token: app.token },
    );
    expect(health.status).toBe(200);
    expect(health.body.data).toEqual([
      {
        origin: new URL(hook.url).origin,
        state: "active",
        state_cause: null,
        failing_since: null,
        delivered: 0,
        failed: 1,
        recovered: 0,
        held: 0,
        pending: 0,
        retried_share: 0,
        p95_run_to_received_ms: null,
        last_failure: { at: expect.any(String), reason: expect.stringContaining("500") },
        concurrency: 6,
      },
    ]);
  });
});
