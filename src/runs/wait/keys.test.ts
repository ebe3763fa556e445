import { createExecutionContext, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { client } from "../../../test/helpers";
import { eventually, keeperOf } from "../../../test/keepers";
import { appCalls, PEER, releaseStream, watchKey, watchState } from "../../../test/peers";
import { seedRunnable } from "../../../test/runs";
import { keptSql } from "../../../test/async-runs";

// One key, one run, in every mode (issue 40 Must 2): a waited run honours `Idempotency-Key` as an async
// run does. Every request under the key reaches the same keeper (the run id is in the key's shard),
// which keeps the key's run: a retry joins it and never calls the app again.

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** Run `runId`'s row of `app`, in its keeper (a run handed over is kept there). */
const rowOf = async (app: { appPath: string }, runId: string) => {
  const run = { run_id: runId, status_url: `http://localhost${app.appPath}/runs/${runId}` };
  const [row] = (await keptSql(run, "SELECT status, mode FROM async_runs WHERE id = ?", runId)) as unknown as {
    status: string;
    mode: string;
  }[];
  return row ?? null;
};

/** How many requests under `runId`'s key wait for it in its keeper now. */
const joined = (projectId: string, runId: string) =>
  runInDurableObject(keeperOf(projectId, runId), (instance: { keeper: { joined(id: string): number } }) =>
    instance.keeper.joined(runId),
  );

describe("Idempotency-Key on a waited run", { timeout: 30_000 }, () => {
  it("a retry that joins its key's run is not a run under way of its own: the list shows the key's run, then nothing", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const underWay = async () =>
      (
        await api.json<{ data: { run_id: string }[] }>(`/v2/projects/${app.projectId}/runs/under-way`, {
          token: app.token,
        })
      ).body.data;
    const headers = { Prefer: "wait=30", "Idempotency-Key": `list-${key}` };
    const first = api.call(app.runPath, { method: "POST", body: {}, token: app.token, headers });
    const runId = await eventually(async () => (await watchState(key)).runId, "the app is called");
    const retry = api.call(app.runPath, { method: "POST", body: {}, token: app.token, headers });
    await eventually(async () => (await joined(app.projectId, runId)) === 1, "the retry joins the run");
    // The tests flush at once (USAGE_FLUSH_MS=0): a start the retry sent would be listed by now.
    await expect.poll(underWay).toEqual([expect.objectContaining({ run_id: runId })]);
    await releaseStream(key);
    for (const answer of [await first, await retry]) {
      expect(answer.headers.get("x-run-id")).toBe(runId);
      await answer.text();
    }
    await expect.poll(underWay).toEqual([]);
  });

  it("a client that hangs up and retries under its key finds its run: the retry waits, gets the run's answer, and the app is called once", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const headers = {
      Authorization: `Bearer ${app.token}`,
      "Content-Type": "application/json",
      Prefer: "wait=60",
      "Idempotency-Key": `order-${key}`,
    };
    const hangUp = new AbortController();
    const first = api.worker
      .fetch(
        new Request(`http://localhost${app.runPath}`, { method: "POST", headers, body: "{}", signal: hangUp.signal }),
        env,
        createExecutionContext(),
      )
      .catch(() => null);
    const runId = await eventually(async () => (await watchState(key)).runId, "the app is called");
    hangUp.abort();
    void first;
    await eventually(() => rowOf(app, runId), "the run is handed over at the hang-up");
    expect(await env.DB.prepare("SELECT id FROM async_runs WHERE id = ?").bind(runId).first()).toBeNull();

    // A retry whose wait ends first: the run resource, the same run.
    const early = await api.call(app.runPath, {
      method: "POST",
      body: {},
      token: app.token,
      headers: { Prefer: "wait=1", "Idempotency-Key": `order-${key}` },
    });
    expect(early.status).toBe(202);
    expect(early.headers.get("x-run-id")).toBe(runId);
    expect(early.headers.get("idempotent-replayed")).toBe("true");
    expect(await early.json()).toMatchObject({ run_id: runId, status: "running" });

    // A retry that waits while the run goes on: the run's answer when it comes.
    const retry = api.call(app.runPath, {
      method: "POST",
      body: {},
      token: app.token,
      headers: { Prefer: "wait=30", "Idempotency-Key": `order-${key}` },
    });
    await eventually(async () => (await joined(app.projectId, runId)) === 1, "the retry joins the run");
    await releaseStream(key);
    const answered = await retry;
    expect(answered.status).toBe(200);
    expect(answered.headers.get("x-run-id")).toBe(runId);
    expect(answered.headers.get("idempotent-replayed")).toBe("true");
    expect(answered.headers.get("preference-applied")).toBe("wait=30");
    expect(await answered.json()).toMatchObject({ run_id: runId, result: { method: "POST" } });

    // Once it has ended and is stored: the run resource, its end.
    await eventually(async () => (await rowOf(app, runId))?.status === "succeeded", "the run is stored");
    const late = await api.call(app.runPath, {
      method: "POST",
      body: {},
      token: app.token,
      headers: { Prefer: "wait=5", "Idempotency-Key": `order-${key}` },
    });
    expect(late.status).toBe(202);
    expect(await late.json()).toMatchObject({ run_id: runId, status: "succeeded" });
    expect(await appCalls(runId)).toBe(1);
  });

  it("concurrent retries under one key make one run: the app is called once, and every answer names that run", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const send = () =>
      api.call(app.runPath, {
        method: "POST",
        body: { n: 1 },
        token: app.token,
        headers: { Prefer: "wait=30", "Idempotency-Key": `burst-${key}` },
      });
    const answers = Array.from({ length: 5 }, send);
    const runId = await eventually(async () => (await watchState(key)).runId, "the app is called");
    await eventually(async () => (await joined(app.projectId, runId)) === 4, "the retries join the run");
    await releaseStream(key);
    const responses = await Promise.all(answers);
    for (const response of responses) {
      expect([200, 202]).toContain(response.status);
      expect(response.headers.get("x-run-id")).toBe(runId);
      expect(((await response.json()) as { run_id: string }).run_id).toBe(runId);
    }
    // The retries had the answer itself; the first request, whose run they joined, its hand-over.
    expect(responses.filter((r) => r.status === 200)).toHaveLength(4);
    expect(await appCalls(runId)).toBe(1);
  });

  it("at most 8 requests under one key wait for its run at once: the next is the caller's 429, and the app is called once", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const send = () =>
      api.call(app.runPath, {
        method: "POST",
        body: {},
        token: app.token,
        headers: { Prefer: "wait=30", "Idempotency-Key": `many-${key}` },
      });
    const answers = Array.from({ length: 10 }, send);
    let refused = 0;
    for (const answer of answers) void answer.then((r) => (r.status === 429 ? refused++ : null));
    const runId = await eventually(async () => (await watchState(key)).runId, "the app is called");
    await eventually(async () => (await joined(app.projectId, runId)) === 8 && refused === 1, "8 join, 1 is refused");
    await releaseStream(key);
    const statuses = (await Promise.all(answers)).map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 202, 429]);
    expect(await appCalls(runId)).toBe(1);
  });

  it("a different request under the key is the 422 an async run's is, naming the run; the app is not called again", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const headers = { Prefer: "wait=5", "Idempotency-Key": "same-key" };
    const first = await api.call(app.runPath, { method: "POST", body: { a: 1 }, token: app.token, headers });
    expect(first.status).toBe(200);
    const runId = first.headers.get("x-run-id")!;
    const other = await api.json<{ code: string; run_id: string }>(app.runPath, {
      method: "POST",
      body: { a: 2 },
      token: app.token,
      headers,
    });
    expect(other.status).toBe(422);
    expect(other.body).toMatchObject({ code: "idempotency_key_reused", run_id: runId });
    // The same request again: its answer went to the request that waited for it, and is not kept.
    const again = await api.json<{ code: string; run_id: string }>(app.runPath, {
      method: "POST",
      body: { a: 1 },
      token: app.token,
      headers,
    });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ code: "conflict", run_id: runId });
    expect(await appCalls(runId)).toBe(1);
  });

  it("the key is the gateway's: the app does not get it, and a malformed key is a 400 naming the header", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const response = await api.json<{ result: { headers: Record<string, string> } }>(app.runPath, {
      method: "POST",
      body: {},
      token: app.token,
      headers: { Prefer: "wait=5", "Idempotency-Key": "gateway-only" },
    });
    expect(response.status).toBe(200);
    expect(response.body.result.headers["idempotency-key"]).toBeUndefined();
    const bad = await api.json<{ errors: { field: string }[] }>(app.runPath, {
      method: "POST",
      body: {},
      token: app.token,
      headers: { Prefer: "wait=5", "Idempotency-Key": "no spaces" },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toMatchObject({ location: "header", field: "Idempotency-Key" });
  });
});
