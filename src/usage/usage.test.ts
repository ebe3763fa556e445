import { env } from "cloudflare:workers";
import type { z } from "@hono/zod-openapi";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { PEER } from "../../test/peers";
import { callWith, seedRunnable, spentBudget } from "../../test/runs";
import { type RunRecordList, type RunRecordSchema } from "./routes";

/** Every run on record, and the figures: black-box through the API (run, then list and usage). */

/** What the API answers for each run: its own response schema. */
type RunItem = z.infer<typeof RunRecordSchema>;
type RunPage = z.infer<typeof RunRecordList>;

const api = client();

async function runsOf(projectId: string, token: string, query = "") {
  const res = await api.json<RunPage>(`/v2/projects/${projectId}/runs${query}`, { token });
  expect(res.status).toBe(200);
  return res.body;
}

describe("GET /v2/projects/{project_id}/runs", () => {
  it("lists every synchronous run newest first, whatever its answer: 200, an app's 500, 413, with what crossed and who ran it", async () => {
    const app = await seedRunnable(api);
    const ok = await api.call(app.runPath, { method: "POST", token: app.token, body: { hello: "world" } });
    const okText = await ok.text();
    expect(ok.status).toBe(200);
    // Newest first is by the time of admission: the clock moves between runs so their order is known.
    api.clock.advance(1);
    const failing = await api.call(`${app.runPath}?status=500`, { token: app.token });
    await failing.text();
    expect(failing.status).toBe(500);
    api.clock.advance(1);
    const big = await api.call(app.runPath, {
      method: "POST",
      token: app.token,
      rawBody: "{}",
      headers: { "Content-Type": "application/json", "Content-Length": String(7 * 1024 * 1024) },
    });
    expect(big.status).toBe(413);

    const { data, next_cursor } = await runsOf(app.projectId, app.token);
    expect(next_cursor).toBeNull();
    expect(data.map((r) => r.status_code)).toEqual([413, 500, 200]);
    const [refused, appError, done] = data as [RunItem, RunItem, RunItem];
    expect(done).toMatchObject({
      run_id: ok.headers.get("x-run-id"),
      app_name: app.appName,
      mode: "sync",
      method: "POST",
      path: "run",
      timed_out: false,
      hung_up: false,
      bytes_in: JSON.stringify({ hello: "world" }).length,
      bytes_out: new TextEncoder().encode(okText).byteLength,
      caller: `sa:${app.serviceAccountId}`,
      webhook: null,
      status_url: null,
      request_id: ok.headers.get("x-request-id"),
      ending: "answered",
      failure: null,
      handed_over: false,
    });
    // The moments of a run, in order after its acceptance.
    const { times } = done;
    expect(times).toMatchObject({ first_byte_ms: null, handed_over_ms: null, ended_ms: done.duration_ms });
    expect(times.called_ms).toBeGreaterThanOrEqual(0);
    expect(times.answered_ms).toBeGreaterThanOrEqual(times.called_ms!);
    expect(times.ended_ms).toBeGreaterThanOrEqual(times.answered_ms!);
    // One record read by its id: the same item.
    const one = await api.json<RunItem>(`/v2/projects/${app.projectId}/runs/${done.run_id}`, { token: app.token });
    expect(one).toMatchObject({ status: 200, body: done });
    expect(appError).toMatchObject({
      run_id: failing.headers.get("x-run-id"),
      method: "GET",
      bytes_in: 0,
      ending: "answered",
      failure: { by: "app", status: 500 },
    });
    expect(refused).toMatchObject({
      mode: "sync",
      path: "run",
      bytes_out: 0,
      request_id: big.headers.get("x-request-id"),
      ending: "refused",
      failure: { by: "gateway", code: "payload_too_large" },
      times: { called_ms: null, answered_ms: null },
    });
  });

  it("filters by status class, mode and app, and pages with a cursor", async () => {
    const app = await seedRunnable(api);
    for (const status of [200, 404, 503, 200]) {
      api.clock.advance(1);
      await (await api.call(`${app.runPath}?status=${status}`, { token: app.token })).text();
    }
    const failed = await runsOf(app.projectId, app.token, "?status=5xx");
    expect(failed.data.map((r) => r.status_code)).toEqual([503]);
    expect((await runsOf(app.projectId, app.token, "?status=4xx")).data.map((r) => r.status_code)).toEqual([404]);
    expect((await runsOf(app.projectId, app.token, "?mode=async")).data).toEqual([]);
    expect((await runsOf(app.projectId, app.token, `?app_name=${app.appName}`)).data).toHaveLength(4);
    expect((await runsOf(app.projectId, app.token, "?app_name=other")).data).toEqual([]);

    const first = await runsOf(app.projectId, app.token, "?limit=3");
    expect(first.data).toHaveLength(3);
    const second = await runsOf(app.projectId, app.token, `?limit=3&cursor=${first.next_cursor}`);
    expect(first.data.map((r) => r.status_code)).toEqual([200, 503, 404]);
    expect(second.data.map((r) => r.status_code)).toEqual([200]);
    expect(second.next_cursor).toBeNull();
    const all = [...first.data, ...second.data].map((r) => r.run_id);
    expect(new Set(all).size).toBe(4);
    expect(all).toEqual([...all].sort().reverse());
  });

  it("records a run that timed out (504)", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo?delay=1000`);
    const slow = await callWith(api, { RUN_TIMEOUT_MS: "100" }, app.runPath, { token: app.token });
    expect(slow.status).toBe(504);
    expect((await runsOf(app.projectId, app.token)).data).toMatchObject([
      {
        status_code: 504,
        timed_out: true,
        ending: "timeout",
        failure: { by: "gateway", code: "gateway_timeout" },
        times: { answered_ms: null },
        run_id: slow.headers.get("x-run-id"),
      },
    ]);
  });

  it("counts a request refused by the project's run budget (429) as a refusal, not a run", async () => {
    const limited = await seedRunnable(api);
    const spent = spentBudget(env.RATE_LIMIT_RUNS, limited.projectId);
    const refused = await callWith(api, { RATE_LIMIT_RUNS: spent }, limited.runPath, { token: limited.token });
    expect(refused.status).toBe(429);
    expect((await runsOf(limited.projectId, limited.token)).data).toEqual([]);
    const usage = await api.json<{ totals: { runs: number; refused: Record<string, number> } }>(
      `/v2/projects/${limited.projectId}/usage`,
      { token: limited.token },
    );
    expect(usage.body.totals).toMatchObject({ runs: 0, refused: { rate_limited: 1, not_found: 0 } });
  });
});

describe("GET /v2/projects/{project_id}/usage", () => {
  it("counts the runs by status class, with exact percentiles and bytes, per hour and in total", async () => {
    const app = await seedRunnable(api);
    // Off the interval's edges: a run's place in its bucket is a fraction of the interval.
    api.clock.advance(17 * 60_000 + 4_321);
    for (const status of [200, 200, 500, 404])
      await (await api.call(`${app.runPath}?status=${status}`, { token: app.token })).text();
    const res = await api.json<{
      series: Record<string, unknown>[];
      totals: Record<string, number>;
      percentiles: string;
      interval: string;
    }>(`/v2/projects/${app.projectId}/usage?interval=hour`, { token: app.token });
    expect(res.status).toBe(200);
    expect(res.body.interval).toBe("hour");
    expect(res.body.series.length).toBeGreaterThanOrEqual(24);
    expect(res.body.totals).toMatchObject({
      runs: 4,
      status_2xx: 2,
      status_4xx: 1,
      status_5xx: 1,
      timeouts: 0,
      bytes_in: 0,
    });
    expect(res.body.totals.bytes_out).toBeGreaterThan(0);
    expect(res.body.percentiles).toBe("exact");
    const runs = (await runsOf(app.projectId, app.token)).data;
    const sorted = runs.map((r) => r.duration_ms).sort((a, b) => a - b);
    expect(res.body.totals.p50_ms).toBe(sorted[1]);
    expect(res.body.totals.p99_ms).toBe(sorted[3]);
    // The one interval with runs holds them all, with the same percentiles; the others are zeros.
    const busy = res.body.series.filter((p) => p.runs !== 0);
    expect(busy).toHaveLength(1);
    expect(busy[0]).toMatchObject({ runs: 4, p50_ms: sorted[1], p95_ms: sorted[3], p99_ms: sorted[3] });
    const byMinute = await api.json<{ series: Record<string, unknown>[] }>(
      `/v2/projects/${app.projectId}/usage?interval=minute&from=${new Date(api.clock.now().getTime() - 3_600_000).toISOString()}`,
      { token: app.token },
    );
    expect(byMinute.body.series.filter((p) => p.runs !== 0)).toMatchObject([{ runs: 4, p50_ms: sorted[1] }]);
  });

  it("splits failures by whose they were, and the app's error rate counts only its own", async () => {
    const app = await seedRunnable(api);
    api.clock.advance(60 * 60_000);
    // Two good runs, the app's own 500 and 502, a 404 of the app's (its verdict on the request), a body
    // refused for size, and a malformed Prefer: wait: the caller's mistakes are three of seven.
    for (const status of [200, 200, 500, 502, 404])
      await (await api.call(`${app.runPath}?status=${status}`, { token: app.token })).text();
    await (
      await api.call(app.runPath, {
        method: "POST",
        token: app.token,
        rawBody: "{}",
        headers: { "Content-Type": "application/json", "Content-Length": String(7 * 1024 * 1024) },
      })
    ).text();
    await (await api.call(app.runPath, { token: app.token, headers: { Prefer: "wait=abc" } })).text();
    const res = await api.json<{ totals: Record<string, number | null> }>(
      `/v2/projects/${app.projectId}/usage?interval=minute&from=${new Date(api.clock.now().getTime() - 60_000).toISOString()}`,
      { token: app.token },
    );
    expect(res.body.totals).toMatchObject({
      runs: 7,
      failures_app: 2,
      failures_caller: 3,
      failures_gateway: 0,
      error_rate: 2 / 7,
    });
  });

  it("says the range it used: a range that does not align with the interval is widened to whole intervals, and the answer says so", async () => {
    const app = await seedRunnable(api);
    const from = "2026-11-21T10:20:00.000Z";
    const to = "2026-11-21T11:40:00.000Z";
    const res = await api.json<{
      from: string;
      to: string;
      asked: { from: string; to: string };
      widened: boolean;
      series: unknown[];
    }>(`/v2/projects/${app.projectId}/usage?interval=hour&from=${from}&to=${to}`, { token: app.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      from: "2026-11-21T10:00:00.000Z",
      to: "2026-11-21T12:00:00.000Z",
      asked: { from, to },
      widened: true,
    });
    expect(res.body.series).toHaveLength(2);
    const aligned = await api.json<{ widened: boolean; series: unknown[] }>(
      `/v2/projects/${app.projectId}/usage?interval=minute&from=${from}&to=${to}`,
      { token: app.token },
    );
    expect(aligned.body.widened).toBe(false);
    expect(aligned.body.series).toHaveLength(80);
  });
});
