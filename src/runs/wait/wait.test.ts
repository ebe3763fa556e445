import { createExecutionContext, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type Client, client } from "../../../test/helpers";
import {
  appCalls,
  PEER,
  received,
  receiver,
  releaseStream,
  watchKey,
  watchState,
  whenClosed,
} from "../../../test/peers";
import { eventReader, follow } from "../../../test/event-streams";
import { eventually, keeperOf } from "../../../test/keepers";
import { seedRunnable } from "../../../test/runs";
import { keptSql } from "../../../test/async-runs";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

interface KeptRunRow {
  status: string;
  mode: string;
  error_code: string | null;
  handed_over_at: number | null;
  started_at: number | null;
  delivery_id: string | null;
}
/** Run `runId`'s row of `app`, in its keeper (a run handed over is kept there, as an async run is). */
const rowOf = async (app: { appPath: string }, runId: string) => {
  const run = { run_id: runId, status_url: `http://localhost${app.appPath}/runs/${runId}` };
  const query = "SELECT status, mode, error_code, handed_over_at, started_at, delivery_id FROM async_runs WHERE id = ?";
  const [row] = (await keptSql(run, query, runId)) as unknown as KeptRunRow[];
  return row ?? null;
};
/** D1's row of run `runId`: never one (a run's row is its keeper's). */
const d1RowOf = (runId: string) => env.DB.prepare("SELECT id FROM async_runs WHERE id = ?").bind(runId).first();

/** The keeper's own state: the runs it holds (each test's project has keepers of its own). */
const keeperState = (projectId: string, runId: string) =>
  runInDurableObject(keeperOf(projectId, runId), (_instance, state) => ({
    rows: state.storage.sql
      .exec<{ record: string }>("SELECT record FROM kept_runs")
      .toArray()
      .map((r) => JSON.parse(r.record) as { phase: string; run: { runId: string } })
      .map((r) => ({ run_id: r.run.runId, phase: r.phase })),
  }));

async function statusOf(api: Client, app: { appPath: string; token: string }, runId: string) {
  return api.json<{ status: string; result: unknown; error: { code: string } | null }>(`${app.appPath}/runs/${runId}`, {
    token: app.token,
  });
}

describe("Prefer: wait, a fast app", { timeout: 20_000 }, () => {
  it("answers as a synchronous run does, with Preference-Applied, and writes no run row; the keeper forgets the run", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const response = await api.call(app.runPath, {
      method: "POST",
      token: app.token,
      body: { inputs: { x: 1 } },
      headers: { Prefer: "wait=5" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("preference-applied")).toBe("wait=5");
    const runId = response.headers.get("x-run-id")!;
    const body = (await response.json()) as {
      run_id: string;
      result: { body: string; headers: Record<string, string> };
    };
    expect(body.run_id).toBe(runId);
    expect(JSON.parse(body.result.body)).toEqual({ inputs: { x: 1 } });
    expect(body.result.headers["x-run-id"]).toBe(runId);
    expect(await appCalls(runId)).toBe(1);
    expect(await rowOf(app, runId)).toBeNull();
    expect(await d1RowOf(runId)).toBeNull();
    await eventually(
      async () => (await keeperState(app.projectId, runId)).rows.length === 0,
      "the keeper forgets its run",
    );
  });

  it("passes a stream through once its headers came within the wait, even when it goes on past it", async () => {
    const api = client();
    const app = await seedRunnable(api, `${PEER}/upstream/echo`, "custom");
    const key = watchKey();
    const response = await api.call(`${app.appPath}/stream?events=2&hold=${key}&watch=${key}`, {
      token: app.token,
      headers: { Prefer: "wait=1", Accept: "text/event-stream" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    expect(response.headers.get("preference-applied")).toBe("wait=1");
    const reader = response.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"i":0');
    // Past the wait: still the caller's stream, never handed over.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    await releaseStream(key);
    let text = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toContain('"i":1');
    const runId = response.headers.get("x-run-id")!;
    expect(await rowOf(app, runId)).toBeNull();
    expect(await d1RowOf(runId)).toBeNull();
    expect(await appCalls(runId)).toBe(1);
  });

  it("answers the app's failure as a synchronous run does: a 502 problem with the run's id", async () => {
    const api = client();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?text=1&type=application/json`);
    const response = await api.call(app.runPath, { token: app.token, headers: { Prefer: "wait" } });
    expect(response.status).toBe(502);
    expect(response.headers.get("preference-applied")).toBe("wait=60");
    const problem = (await response.json()) as { code: string; run_id: string };
    expect(problem.code).toBe("bad_gateway");
    expect(problem.run_id).toBe(response.headers.get("x-run-id"));
  });

  it("ignores Prefer with ?async=true: the run is async", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const response = await api.call(`${app.runPath}?async=true`, { token: app.token, headers: { Prefer: "wait=5" } });
    expect(response.status).toBe(202);
    expect(response.headers.get("preference-applied")).toBeNull();
    expect(((await response.json()) as { status: string }).status).toBe("queued");
  });
});

describe("Prefer: wait, a custom app's upload", { timeout: 20_000 }, () => {
  it("reaches the app byte for byte (read whole, then handed to the keeper)", async () => {
    const api = client();
    const app = await seedRunnable(api, `${PEER}/upstream/echo`, "custom");
    const bytes = new Uint8Array(70_000).map((_, i) => (i * 7) & 0xff);
    const response = await api.call(`${app.appPath}/upload?raw=1`, {
      method: "POST",
      token: app.token,
      rawBody: bytes,
      headers: { Prefer: "wait=5", "Content-Type": "application/octet-stream" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("preference-applied")).toBe("wait=5");
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(bytes);
  });

  it("past the run's size limit is a 413 before anything is handed over; the app is not called", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo`, "custom");
    const chunk = new Uint8Array(1024 * 1024);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 7) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const response = await api.call(`${app.appPath}/upload?raw=1&watch=${key}`, {
      method: "POST",
      token: app.token,
      rawBody: body,
      headers: { Prefer: "wait=5", "Content-Type": "application/octet-stream" },
    });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { code: string }).code).toBe("payload_too_large");
    expect((await watchState(key)).runId).toBeNull();
  });
});

describe("Prefer: wait, a slow app", { timeout: 20_000 }, () => {
  it("answers 202 with the run resource past the wait; the run goes on, its result is stored and read as an async run's", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}`);
    const started = Date.now();
    const response = await api.call(app.runPath, { token: app.token, headers: { Prefer: "wait=1" } });
    expect(response.status).toBe(202);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(response.headers.get("preference-applied")).toBe("wait=1");
    const body = (await response.json()) as {
      run_id: string;
      status: string;
      status_url: string;
      urls: { get: string; cancel: string; stream: string };
    };
    const runId = body.run_id;
    expect(response.headers.get("x-run-id")).toBe(runId);
    const url = `http://localhost${app.appPath}/runs/${runId}`;
    expect(body).toEqual({
      run_id: runId,
      status: "running",
      status_url: url,
      urls: { get: url, cancel: url, stream: url },
    });
    expect(response.headers.get("location")).toBe(url);
    expect(await rowOf(app, runId)).toMatchObject({ status: "running", mode: "wait", delivery_id: null });
    expect((await rowOf(app, runId))!.handed_over_at).not.toBeNull();
    expect(await d1RowOf(runId)).toBeNull();
    expect((await statusOf(api, app, runId)).body.status).toBe("running");
    expect((await keeperState(app.projectId, runId)).rows).toEqual([{ run_id: runId, phase: "handed_over" }]);

    await releaseStream(key);
    const done = await eventually(async () => {
      const read = await statusOf(api, app, runId);
      return read.body.status === "succeeded" ? read.body : null;
    }, "the run succeeds");
    expect(done.result).toMatchObject({ run_id: runId, result: { method: "GET" } });
    expect(await appCalls(runId)).toBe(1);
    await eventually(
      async () => (await keeperState(app.projectId, runId)).rows.length === 0,
      "the keeper forgets its run",
    );
  });

  it("hands the run over the moment its caller hangs up, and goes on: the app is not cut off", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const hangUp = new AbortController();
    const request = new Request(`http://localhost${app.runPath}`, {
      headers: { Authorization: `Bearer ${app.token}`, Prefer: "wait=60" },
      signal: hangUp.signal,
    });
    const ctx = createExecutionContext();
    const answering = api.worker.fetch(request, env, ctx).catch(() => null);
    const runId = await eventually(async () => (await watchState(key)).runId, "the app is called");
    void answering;
    hangUp.abort();
    const row = await eventually(() => rowOf(app, runId), "the run is handed over");
    expect(row).toMatchObject({ status: "running", mode: "wait" });
    expect(await d1RowOf(runId)).toBeNull();
    await releaseStream(key);
    const done = await eventually(async () => {
      const read = await statusOf(api, app, runId);
      return read.body.status === "succeeded" ? read.body : null;
    }, "the run succeeds");
    expect(done.result).toMatchObject({ run_id: runId });
    expect(await appCalls(runId)).toBe(1);
  });

  it("delivers the stored result to the webhook, once", async () => {
    const api = client();
    const key = watchKey();
    const hook = await receiver();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}`);
    const response = await api.call(`${app.runPath}?webhookEndpoint=${encodeURIComponent(hook.url)}`, {
      token: app.token,
      headers: { Prefer: "wait=1" },
    });
    expect(response.status).toBe(202);
    const { run_id: runId } = (await response.json()) as { run_id: string };
    expect((await rowOf(app, runId))!.delivery_id).toMatch(/^whd_/);
    expect(await d1RowOf(runId)).toBeNull();
    await releaseStream(key);
    const done = await eventually(async () => {
      const read = await api.call(`${app.appPath}/runs/${runId}`, { token: app.token });
      const text = await read.text();
      return text.includes('"status":"succeeded"') ? text : null;
    }, "the run succeeds");
    const deliveries = await eventually(async () => {
      const got = await received(hook.key);
      return got.length > 0 ? got : null;
    }, "the delivery arrives");
    expect(deliveries).toHaveLength(1);
    expect(done).toContain(deliveries[0]!.body!);
  });
});

describe("a handed-over run followed as a stream", { timeout: 20_000 }, () => {
  it("sends its state as it is when followed (running, waited, handed over), then its end from the keeper", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}`);
    const response = await api.call(app.runPath, { token: app.token, headers: { Prefer: "wait=1" } });
    const { urls } = (await response.json()) as { urls: { stream: string } };
    const events = eventReader(await follow(api, urls.stream, app.token));
    const first = await events.event();
    expect(first!.run).toMatchObject({ status: "running", mode: "wait" });
    expect(first!.run.handed_over_at).not.toBeNull();
    await releaseStream(key);
    const last = await events.event();
    expect(last!.run).toMatchObject({ status: "succeeded", mode: "wait", status_code: 200 });
    expect(last!.run.result).toMatchObject({ result: { method: "GET" } });
    expect(await events.event()).toBeNull();
  });
});

describe("Cancel-After on a waited run", { timeout: 20_000 }, () => {
  it("ends the app's call at the deadline: within the wait the caller gets the 504; handed over, the run ends failed, `deadline`", async () => {
    // The keeper's deadline runs on the platform's clock: 5 s, the shortest a deadline may be.
    const api = client();
    const waitingKey = watchKey();
    const handedKey = watchKey();
    const waiting = await seedRunnable(api, `${PEER}/upstream/echo?hold=${waitingKey}&watch=${waitingKey}`);
    const handed = await seedRunnable(api, `${PEER}/upstream/echo?hold=${handedKey}&watch=${handedKey}`);
    const [answered, accepted] = await Promise.all([
      api.call(waiting.runPath, { token: waiting.token, headers: { Prefer: "wait=30", "Cancel-After": "5s" } }),
      api.call(handed.runPath, { token: handed.token, headers: { Prefer: "wait=1", "Cancel-After": "5" } }),
    ]);
    expect(answered.status).toBe(504);
    expect(answered.headers.get("preference-applied")).toBe("wait=30");
    expect(await answered.json()).toMatchObject({ code: "run_deadline", run_id: answered.headers.get("x-run-id") });
    expect((await whenClosed(waitingKey)).closed).toBe(true);

    expect(accepted.status).toBe(202);
    const { run_id: runId } = (await accepted.json()) as { run_id: string };
    const done = await eventually(async () => {
      const read = await statusOf(api, handed, runId);
      return read.body.status === "failed" ? read.body : null;
    }, "the handed-over run ends");
    expect(done.error).toMatchObject({ code: "deadline" });
    expect(done.result).toMatchObject({ code: "run_deadline", status: 504 });
    expect((await whenClosed(handedKey)).closed).toBe(true);
    expect(await appCalls(runId)).toBe(1);
    expect(await appCalls(answered.headers.get("x-run-id")!)).toBe(1);
  }, 20_000);

  it("refuses a deadline past what a keeper can hold, before any call", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const response = await api.json<{ errors: { field: string; message: string }[] }>(app.runPath, {
      token: app.token,
      headers: { Prefer: "wait=5", "Cancel-After": "16m" },
    });
    expect(response.status).toBe(400);
    expect(response.body.errors[0]).toEqual({
      location: "header",
      field: "Cancel-After",
      message: "must be at most 15m for a waited run (Prefer: wait)",
    });
  });
});
