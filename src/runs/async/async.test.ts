import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { consume, gatedOutbound, keptRun, poll, startAsync } from "../../../test/async-runs";
import { client } from "../../../test/helpers";
import { DOWN, PEER, received, receiver, sha256Hex } from "../../../test/peers";
import { seedRunnable } from "../../../test/runs";
import { drive } from "../../../test/webhooks";
import type { DeliveryMessage } from "../../webhooks/message";
import { KEEPER_SHARDS, keeperObject, keeperOfShard } from "../wait/shard";
import { runById } from "./store";
import { createDb } from "../../db/client";

const api = client();
const db = createDb(env.DB);
const SECRET = "async-run-webhook-secret";

beforeEach(() => {
  // Failed and interrupted runs log an error line by design.
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** How many runs of `projectId` are stored: in D1 (none since the move) and in each of its keepers. */
async function storedRuns(projectId: string) {
  const inD1 = await env.DB.prepare("SELECT count(*) AS n FROM async_runs WHERE project_id = ?")
    .bind(projectId)
    .first<{ n: number }>();
  let kept = 0;
  for (let shard = 0; shard < KEEPER_SHARDS; shard++) {
    const keeper = keeperObject(env, keeperOfShard(projectId, shard));
    kept += await runInDurableObject(
      keeper,
      (_instance, state) =>
        state.storage.sql
          .exec<{ n: number }>("SELECT count(*) AS n FROM async_runs WHERE project_id = ?", projectId)
          .one().n,
    );
  }
  return { inD1: inD1!.n, kept };
}

interface Echo {
  method: string;
  query: [string, string][];
  headers: Record<string, string>;
  body: string | null;
}

describe("?async=true: accepted at once", () => {
  it("answers 202 {run_id, status: queued, status_url} with Location and X-Run-Id, and queues one message", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    expect(started.response.status).toBe(202);
    expect(Object.keys(started.body)).toEqual(["run_id", "status", "status_url", "urls"]);
    expect(started.body.run_id).toMatch(/^run_/);
    expect(started.body.status).toBe("queued");
    expect(started.body.status_url).toBe(
      `http://localhost/v4/${app.projectId}/${app.appName}/runs/${started.body.run_id}`,
    );
    expect(started.response.headers.get("location")).toBe(started.body.status_url);
    const url = started.body.status_url;
    expect(started.body.urls).toEqual({ get: url, cancel: url, stream: url });
    expect(started.response.headers.get("x-run-id")).toBe(started.body.run_id);
    expect(started.response.headers.get("x-request-id")).toMatch(/^req_/);
    expect(started.sent).toEqual([{ v: 1, run_id: started.body.run_id, project_id: app.projectId }]);
    const view = await poll(api, started.body.status_url, app.token);
    expect(view.status).toBe(200);
    expect(view.body).toMatchObject({
      run_id: started.body.run_id,
      status: "queued",
      started_at: null,
      finished_at: null,
      result: null,
      error: null,
    });
  });

  it("makes every check of a synchronous run first: nothing is queued or stored when one fails", async () => {
    const app = await seedRunnable(api);
    const other = await seedRunnable(api);
    const undeployed = await api.json(`/v2/projects/${app.projectId}/apps`, {
      method: "POST",
      token: app.token,
      body: { name: "nodeploy", region: "us-east-1", runtime: "custom" },
    });
    expect(undeployed.status).toBe(201);
    const cases: [string, Parameters<typeof startAsync>[2] & { path?: string }, number, string][] = [
      ["no key", { token: "nope" }, 401, "invalid_token"],
      ["another project's key", { token: other.token }, 404, "not_found"],
      [
        "a bad webhookEndpoint",
        { query: `webhookEndpoint=${encodeURIComponent("https://10.0.0.1/hook")}` },
        400,
        "validation_failed",
      ],
      ["a body that is not an object", { rawBody: "[1]" }, 400, "validation_failed"],
      ["malformed JSON", { rawBody: "{" }, 400, "malformed_json"],
      [
        "a cortex body that is not UTF-8",
        { rawBody: Uint8Array.of(...new TextEncoder().encode('{"a":"'), 0xff, 0x22, 0x7d) },
        400,
        "malformed_json",
      ],
      ["async neither true nor false", { query: "async=yes" }, 400, "validation_failed"],
      ["a malformed Idempotency-Key", { headers: { "Idempotency-Key": "with space" } }, 400, "validation_failed"],
    ];
    for (const [name, options, status, code] of cases) {
      const started = await startAsync(api, app, options);
      expect(started.response.status, name).toBe(status);
      expect(started.body.code, name).toBe(code);
      expect(started.sent, name).toEqual([]);
    }
    const none = await startAsync(api, { runPath: `/v4/${app.projectId}/nodeploy/run`, token: app.token });
    expect(none.response.status).toBe(409);
    expect(none.sent).toEqual([]);
    expect(await storedRuns(app.projectId)).toEqual({ inD1: 0, kept: 0 });
    // What is counted: an accepted run is kept by one of the project's keepers, never by D1.
    expect((await startAsync(api, app)).response.status).toBe(202);
    expect(await storedRuns(app.projectId)).toEqual({ inD1: 0, kept: 1 });
  });

  it("answers 503 and leaves no run behind when the queue refuses the message", async () => {
    const app = await seedRunnable(api);
    const broken = { send: () => Promise.reject(new Error("queue unavailable")) };
    const response = await api.worker.fetch(
      new Request(`http://localhost${app.runPath}?async=true`, { headers: { Authorization: `Bearer ${app.token}` } }),
      { ...env, ASYNC_RUN_QUEUE: broken as unknown as Queue },
      { waitUntil: () => undefined, passThroughOnException: () => undefined, props: {} } as unknown as ExecutionContext,
    );
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("1");
    expect(await storedRuns(app.projectId)).toEqual({ inD1: 0, kept: 0 });
  });
});

describe("an async run's life: queued → running → succeeded | failed | cancelled", () => {
  it("polling sees queued, then running while the app works, then succeeded with the synchronous run's exact answer", async () => {
    const app = await seedRunnable(api);
    const raw = '{"inputs":{"prompt":"hi","n":1.50}}';
    const started = await startAsync(api, app, {
      rawBody: raw,
      query: "temperature=0.2",
      headers: { "X-Custom": "kept" },
    });
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("queued");

    const upstream = gatedOutbound();
    upstream.hold();
    const consumed = consume(api, started.message, { deps: { outbound: upstream.outbound } });
    await upstream.reached;
    const running = await poll(api, started.body.status_url, app.token);
    expect(running.body).toMatchObject({ status: "running", finished_at: null, result: null });
    expect(running.body.started_at).toBe(api.clock.now().toISOString());
    api.clock.advance(1_500);
    upstream.release();
    expect(await consumed).toMatchObject({ acked: true, retried: false });

    const done = await poll(api, started.body.status_url, app.token);
    expect(done.body).toMatchObject({
      status: "succeeded",
      status_code: 200,
      error: null,
      finished_at: api.clock.now().toISOString(),
    });
    // The synchronous run's envelope: its run_id, the app's JSON untouched, the body and query as sent, ours removed.
    const envelope = done.body.result as { run_id: string; result: Echo; run_time_ms: number; timestamp: string };
    expect(Object.keys(envelope)).toEqual(["run_id", "result", "run_time_ms", "timestamp"]);
    expect(envelope.run_id).toBe(started.body.run_id);
    expect(envelope.result.method).toBe("POST");
    expect(envelope.result.body).toBe(raw);
    expect(envelope.result.query).toEqual([["temperature", "0.2"]]);
    expect(envelope.result.headers["x-run-id"]).toBe(started.body.run_id);
    expect(envelope.result.headers["x-custom"]).toBe("kept");
    expect(envelope.result.headers.authorization).toBeUndefined();
    expect(await runById(db, started.body.run_id)).toBeUndefined();
    const stored = await keptRun(started.body);
    expect(done.rawResult).toBe(stored!.result);
    expect(stored!.requestBody).toBeNull();
  });

  it("runs with GET and no body too", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app, { method: "GET", query: "a=1" });
    expect(started.response.status).toBe(202);
    await consume(api, started.message);
    const done = await poll(api, started.body.status_url, app.token);
    const envelope = done.body.result as { result: Echo };
    expect(envelope.result).toMatchObject({ method: "GET", body: null, query: [["a", "1"]] });
  });

  it("ends failed with the app's envelope when the app answers a non-2xx status", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?status=422`);
    const started = await startAsync(api, app);
    await consume(api, started.message);
    const done = await poll(api, started.body.status_url, app.token);
    expect(done.body).toMatchObject({
      status: "failed",
      status_code: 422,
      error: { code: "upstream_status", message: "The app answered 422." },
    });
    expect((done.body.result as { result: Echo }).result.method).toBe("POST");
  });

  it("ends failed with the 502 problem when the app cannot be reached", async () => {
    const app = await seedRunnable(api, `${DOWN}/app`);
    const started = await startAsync(api, app);
    await consume(api, started.message);
    const done = await poll(api, started.body.status_url, app.token);
    expect(done.body).toMatchObject({ status: "failed", status_code: 502, error: { code: "bad_gateway" } });
    expect(done.body.result).toMatchObject({
      code: "bad_gateway",
      run_id: started.body.run_id,
      request_id: started.response.headers.get("x-request-id"),
    });
  });

  it("ends failed with a reason when the app outlives ASYNC_RUN_TIMEOUT_MS (the run's, as it was admitted)", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?delay=1500`);
    const started = await startAsync(api, app, { bindings: { ASYNC_RUN_TIMEOUT_MS: "200" } });
    const before = Date.now();
    // The consumer's own setting does not change a run admitted before: its limits travel with it.
    await consume(api, started.message, { bindings: { ASYNC_RUN_TIMEOUT_MS: "60000" } });
    expect(Date.now() - before).toBeLessThan(1_200);
    const done = await poll(api, started.body.status_url, app.token);
    expect(done.body).toMatchObject({
      status: "failed",
      status_code: 504,
      error: { code: "gateway_timeout", message: "The app did not answer within 200 ms." },
    });
    expect(done.body.result).toMatchObject({ code: "gateway_timeout", run_id: started.body.run_id });
  });

  it("refuses an ASYNC_RUN_TIMEOUT_MS beyond what one consumer invocation allows", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const response = await api.worker.fetch(
      new Request(`http://localhost${app.runPath}?async=true`, { headers: { Authorization: `Bearer ${app.token}` } }),
      { ...env, ASYNC_RUN_TIMEOUT_MS: String(15 * 60_000) },
      { waitUntil: () => undefined, passThroughOnException: () => undefined, props: {} } as unknown as ExecutionContext,
    );
    expect(response.status).toBe(500);
    expect(((await response.json()) as { detail: string }).detail).toMatch(
      /ASYNC_RUN_TIMEOUT_MS must be at most 840000/,
    );
    expect(started.response.status).toBe(202);
  });

  it("carries a request body larger than its D1 row through R2, intact, and removes it afterwards", async () => {
    const app = await seedRunnable(api);
    const raw = JSON.stringify({ inputs: { pad: "é".repeat(200_000) } });
    const started = await startAsync(api, app, { rawBody: raw });
    const queued = await keptRun(started.body);
    expect(queued).toMatchObject({ requestInR2: true, requestBody: null });
    expect(await env.RUN_PAYLOADS.head(`runs/${started.body.run_id}/request`)).not.toBeNull();
    await consume(api, started.message);
    const done = await poll(api, started.body.status_url, app.token);
    expect((done.body.result as { result: Echo }).result.body).toBe(raw);
    expect(await env.RUN_PAYLOADS.head(`runs/${started.body.run_id}/request`)).toBeNull();
  });
});

describe("webhooks of async runs", () => {
  it("delivers the stored result byte for byte, signed", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200 }], SECRET);
    const started = await startAsync(api, app, {
      query: `webhookEndpoint=${encodeURIComponent(hook.url)}`,
      headers: { "X-Webhook-Secret": SECRET },
    });
    const stored = await keptRun(started.body);
    expect(stored!.webhookSecret).not.toBeNull();
    expect(stored!.webhookSecret).not.toContain(SECRET);
    const { deliveries } = await consume(api, started.message);
    expect(deliveries).toHaveLength(1);
    await drive(api, deliveries[0]);
    const [got] = await received(hook.key);
    const done = await poll(api, started.body.status_url, app.token);
    expect(got!.body).toBe(done.rawResult);
    expect(got!.signatures).toEqual({ node: true, openssl: true, standard: true });
    expect(await keptRun(started.body)).toMatchObject({
      webhookSecret: null,
      deliveryId: got!.headers["x-request-id"],
    });
  });

  it("stores a 5 MB result in R2 and both delivers and answers it intact", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?bytes=${5 * 1024 * 1024}`);
    const hook = await receiver([{ status: 200 }], SECRET);
    const started = await startAsync(api, app, {
      query: `webhookEndpoint=${encodeURIComponent(hook.url)}`,
      headers: { "X-Webhook-Secret": SECRET },
    });
    const { deliveries } = await consume(api, started.message);
    const row = await keptRun(started.body);
    expect(row).toMatchObject({ status: "succeeded", resultInR2: true, result: null });
    expect(row!.resultBytes).toBeGreaterThan(5 * 1024 * 1024);
    const done = await poll(api, started.body.status_url, app.token);
    expect(done.rawResult!.length).toBe(row!.resultBytes);
    expect("r2" in (deliveries[0] as DeliveryMessage).body).toBe(true);
    await drive(api, deliveries[0]);
    const [got] = await received(hook.key);
    expect(got!.bodyLength).toBe(row!.resultBytes);
    expect(got!.bodySha256).toBe(await sha256Hex(done.rawResult!));
    expect(got!.signatures).toEqual({ node: true, openssl: true, standard: true });
  });

  it("sends no webhook for a cancelled run", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app, {
      query: `webhookEndpoint=${encodeURIComponent(`${PEER}/hooks/none`)}`,
    });
    expect(
      (await api.call(new URL(started.body.status_url).pathname, { method: "DELETE", token: app.token })).status,
    ).toBe(200);
    const upstream = gatedOutbound();
    const { acked, deliveries } = await consume(api, started.message, { deps: { outbound: upstream.outbound } });
    expect(acked).toBe(true);
    expect(deliveries).toEqual([]);
    expect(upstream.calls).toBe(0);
  });
});
