import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  getQueueResult,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { describeError, redact } from "../../src/platform/log";
import { CRONS, QUEUES } from "../../src/platform/triggers";
import { visitor } from "../dashboard-helpers";
import { client } from "../helpers";
import { callWith, seedRunnable } from "../runs";

/** Every line written to the console while a test runs, as the object it was written as. */
let lines: Record<string, unknown>[] = [];

beforeEach(() => {
  lines = [];
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      // One object per call: a string (or a second argument) is a line Workers Logs cannot index.
      expect(args, `console.${level} with ${JSON.stringify(args).slice(0, 200)}`).toHaveLength(1);
      expect(typeof args[0], `console.${level}(${JSON.stringify(args[0]).slice(0, 200)})`).toBe("object");
      lines.push(args[0] as Record<string, unknown>);
    });
  }
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A D1 that is down: every statement and batch fails as D1 does when it loses its connection. */
function unavailableD1(): D1Database {
  const fail = () => Promise.reject(new Error("D1_ERROR: Network connection lost. (injected)"));
  const statement = { bind: () => statement, run: fail, all: fail, first: fail, raw: fail };
  return { prepare: () => statement, batch: fail, exec: fail } as unknown as D1Database;
}

const requestLines = () => lines.filter((line) => line.message === "request");

describe("request lines", () => {
  it("writes exactly one structured line per management request: method, route pattern, status, duration, request and project ids", async () => {
    const api = client();
    const app = await seedRunnable(api);
    lines = [];
    const response = await api.call(`/v2/projects/${app.projectId}/apps/${app.appId}`, { token: app.token });
    expect(response.status).toBe(200);
    const [line, ...more] = requestLines();
    expect(more).toEqual([]);
    expect(line).toEqual({
      level: "info",
      message: "request",
      request_id: response.headers.get("x-request-id"),
      project_id: app.projectId,
      method: "GET",
      route: "/v2/projects/:project_id/apps/:app_id",
      status: 200,
      duration_ms: expect.any(Number),
    });
  });

  it("names the route a problem came from, at level error for a 5xx", async () => {
    const api = client();
    const missing = await api.call("/v2/projects/proj_0000000000000000000000000000/nothing-here");
    expect(missing.status).toBe(404);
    expect(requestLines()).toEqual([
      expect.objectContaining({
        level: "info",
        status: 404,
        method: "GET",
        request_id: missing.headers.get("x-request-id"),
      }),
    ]);

    const app = await seedRunnable(api);
    lines = [];
    const down = unavailableD1();
    const failed = await callWith(api, { DB: down }, `/v2/projects/${app.projectId}/apps`, { token: app.token });
    expect(failed.status).toBe(503);
    expect(requestLines()).toEqual([
      expect.objectContaining({
        level: "error",
        status: 503,
        route: "/v2/projects/:project_id/apps",
        request_id: failed.headers.get("x-request-id"),
      }),
    ]);
    // The failure's own line says what failed, under the same request id.
    expect(lines.find((line) => line.message === "storage unavailable")).toMatchObject({
      request_id: failed.headers.get("x-request-id"),
    });
  });

  it("writes one line for a run through the run entry, with the run's id and app, and none per chunk of its answer", async () => {
    const api = client();
    const app = await seedRunnable(api);
    lines = [];
    const response = await api.call(app.runPath, { method: "POST", token: app.token, body: { prompt: "hello" } });
    expect(response.status).toBe(200);
    await response.text();
    expect(requestLines()).toEqual([
      {
        level: "info",
        message: "request",
        request_id: response.headers.get("x-request-id"),
        project_id: app.projectId,
        method: "POST",
        route: expect.stringMatching(/^\/v4\/:project_id\/:app_name\//),
        status: 200,
        duration_ms: expect.any(Number),
        run_id: response.headers.get("x-run-id"),
        app_name: app.appName,
      },
    ]);
    // Nothing of the call is written besides its request line.
    expect(lines).toHaveLength(1);
  });

  it("gives every line a request writes its request id, and a dashboard page's API calls the page's id", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const browser = visitor(api);
    await browser.signIn();
    lines = [];
    const page = await browser.get(`/dashboard/projects/${app.projectId}/apps`);
    expect(page.status).toBe(200);
    const requests = requestLines();
    const outer = requests.filter((line) => line.via === undefined);
    expect(outer).toEqual([
      expect.objectContaining({
        route: "/dashboard/projects/:project_id/apps",
        status: 200,
        project_id: app.projectId,
      }),
    ]);
    const inner = requests.filter((line) => line.via === "in-process");
    expect(inner.length).toBeGreaterThan(0);
    for (const line of inner) expect(line.request_id).toBe(outer[0]!.request_id);
  });
});

describe("queue batch and cron lines", () => {
  it("writes one line per queue batch, with the queue, the batch size and the outcome", async () => {
    const api = client();
    const batch = createMessageBatch(QUEUES.domainValidations, [
      { id: "m1", timestamp: new Date(), attempts: 1, body: { nonsense: true } },
      { id: "m2", timestamp: new Date(), attempts: 1, body: { nonsense: true } },
    ]);
    const ctx = createExecutionContext();
    await api.worker.queue(batch, env, ctx);
    await getQueueResult(batch, ctx);
    const batchLines = lines.filter((line) => line.message === "queue batch");
    expect(batchLines).toEqual([
      {
        level: "info",
        message: "queue batch",
        request_id: expect.stringMatching(/^req_/),
        queue: QUEUES.domainValidations,
        messages: 2,
        outcome: "ok",
        duration_ms: expect.any(Number),
      },
    ]);
    // The handler's own lines carry the batch's request id and queue.
    const dropped = lines.filter((line) => line.message === "malformed domain validation message dropped");
    expect(dropped).toHaveLength(2);
    for (const line of dropped)
      expect(line).toMatchObject({ request_id: batchLines[0]!.request_id, queue: QUEUES.domainValidations });
  });

  it("writes one line per cron invocation, and an error line (then the error) when it fails", async () => {
    const api = client();
    const ctx = createExecutionContext();
    await api.worker.scheduled(
      createScheduledController({ cron: CRONS.asyncRuns, scheduledTime: Date.now() }),
      env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(lines.filter((line) => line.message === "cron")).toEqual([
      {
        level: "info",
        message: "cron",
        request_id: expect.stringMatching(/^req_/),
        cron: CRONS.asyncRuns,
        outcome: "ok",
        duration_ms: expect.any(Number),
      },
    ]);

    lines = [];
    const broken = { ...env, DB: unavailableD1() } as unknown as Env;
    await expect(
      api.worker.scheduled(
        createScheduledController({ cron: CRONS.asyncRuns, scheduledTime: Date.now() }),
        broken,
        createExecutionContext(),
      ),
    ).rejects.toThrow();
    expect(lines.filter((line) => line.message === "cron")).toEqual([
      expect.objectContaining({
        level: "error",
        cron: CRONS.asyncRuns,
        outcome: "error",
        error: expect.objectContaining({ name: "Error" }),
      }),
    ]);
  });
});

describe("errors as logs show them", () => {
  it("keeps a failed statement's SQL and drops its parameters, its cause's too", () => {
    const cause = new Error("D1_ERROR: UNIQUE constraint failed: async_runs.id: SQLITE_CONSTRAINT");
    const error = new Error(
      'Failed query: insert into "async_runs" ("id", "request_headers") values (?, ?)\nparams: run_1,[["x-api-key","sk_live_abcdef0123456789abcdef"]]',
      { cause },
    );
    const described = describeError(error, { withStack: true });
    expect(described.message).toContain("insert into");
    expect(described.message).toContain("UNIQUE constraint failed");
    expect(JSON.stringify(described)).not.toContain("sk_live");
    expect(described.stack ?? "").not.toContain("sk_live");
  });

  it("keeps a URL's origin only, and no bearer token or long secret", () => {
    const text = redact(
      "fetch https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX?x=1 failed; Bearer eyJhbGciOi.abc.def; key 0123456789abcdef0123456789abcdef",
    );
    expect(text).toContain("https://hooks.slack.com/[redacted]");
    expect(text).not.toMatch(/services|XXXXsecret|eyJhbGciOi|0123456789abcdef0123/);
  });
});
