import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { consume, gatedOutbound, keptSql, poll, startAsync } from "../../test/async-runs";
import { client } from "../../test/helpers";
import { appCalls, PEER, releaseStream, watchKey, watchState, whenClosed } from "../../test/peers";
import { seedRunnable } from "../../test/runs";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A `deps.sleep` whose waits end when the test says: the deadline passes at the test's moment, not the wall clock's. */
function heldSleep() {
  const waits: { ms: number; end: () => void }[] = [];
  return {
    waits,
    sleep: (ms: number) => new Promise<void>((resolve) => waits.push({ ms, end: resolve })),
    /** Ends every wait so far (the deadline passes). */
    pass: () => waits.splice(0).forEach((w) => w.end()),
  };
}

/** An outbound fetch that counts the app calls. */
function countingOutbound() {
  const calls: string[] = [];
  return { calls, fetch: (request: Request) => (calls.push(request.url), fetch(request)) };
}

const until = async (check: () => boolean | Promise<boolean>) => {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 5));
};
/** The watched call reached the app: a deadline passed before would end a call the app never saw. */
const arrived = async (key: string) => (await watchState(key)).arrived;

// Each test seeds a project and calls a real peer: on a busy machine that alone can take seconds.
describe("Cancel-After on a synchronous run", { timeout: 20_000 }, () => {
  it("ends the app's call at the deadline: the caller gets a 504 run_deadline problem, the app sees its connection close", async () => {
    const clock = heldSleep();
    const api = client({ sleep: clock.sleep });
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const answering = api.call(app.runPath, { token: app.token, headers: { "Cancel-After": "30s" } });
    await until(() => clock.waits.length > 0);
    // Counted from acceptance: the wait is the deadline less what admission took.
    expect(clock.waits[0]!.ms).toBeGreaterThan(29_000);
    expect(clock.waits[0]!.ms).toBeLessThanOrEqual(30_000);
    await until(() => arrived(key));
    clock.pass();
    const response = await answering;
    expect(response.status).toBe(504);
    const problem = (await response.json()) as Record<string, unknown>;
    expect(problem).toMatchObject({ code: "run_deadline", status: 504 });
    expect(problem.detail).toContain("30s");
    const runId = response.headers.get("x-run-id")!;
    expect(problem.run_id).toBe(runId);
    expect((await whenClosed(key)).closed).toBe(true);
    expect(await appCalls(runId)).toBe(1);
  });

  it("ends a stream mid-way: the caller's body breaks off after what the app sent", async () => {
    const clock = heldSleep();
    const api = client({ sleep: clock.sleep });
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo`, "custom");
    const response = await api.call(`${app.appPath}/stream?events=3&hold=${key}&watch=${key}`, {
      token: app.token,
      headers: { "Cancel-After": "1m" },
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain('"i":0');
    clock.pass();
    await expect(reader.read()).rejects.toThrow();
    expect((await whenClosed(key)).closed).toBe(true);
    await releaseStream(key);
  });

  it("never fires for a run that ended before it", async () => {
    const clock = heldSleep();
    const api = client({ sleep: clock.sleep });
    const app = await seedRunnable(api);
    const response = await api.call(app.runPath, { token: app.token, headers: { "Cancel-After": "5s" } });
    expect(response.status).toBe(200);
    clock.pass();
    expect(((await response.json()) as { result: unknown }).result).toBeTruthy();
  });

  it.each(["4s", "abc", "25h", "10s, 20s"])(
    "refuses Cancel-After %j with a 400 naming the header; the app is not called",
    async (value) => {
      const outbound = countingOutbound();
      const api = client({ outbound });
      const app = await seedRunnable(api);
      const response = await api.json<{ code: string; errors: { location: string; field: string }[] }>(app.runPath, {
        token: app.token,
        headers: { "Cancel-After": value },
      });
      expect(response.status).toBe(400);
      expect(response.body.code).toBe("validation_failed");
      expect(response.body.errors[0]).toMatchObject({ location: "header", field: "Cancel-After" });
      expect(outbound.calls).toHaveLength(0);
    },
  );

  it("is not passed to the app: the deadline is the gateway's", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const response = await api.json<{ result: { headers: Record<string, string> } }>(app.runPath, {
      token: app.token,
      headers: { "Cancel-After": "10s", Prefer: "return=minimal" },
    });
    expect(response.status).toBe(200);
    expect(response.body.result.headers["cancel-after"]).toBeUndefined();
    expect(response.body.result.headers.prefer).toBe("return=minimal");
  });
});

describe("Cancel-After on an async run", { timeout: 20_000 }, () => {
  it("is stored with the queued run, counted from acceptance", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app, { headers: { "Cancel-After": "2h30m" } });
    expect(started.response.status).toBe(202);
    // Stored in the run's keeper, never in D1.
    const [row] = (await keptSql(
      started.body,
      "SELECT created_at, deadline_at FROM async_runs WHERE id = ?",
      started.body.run_id,
    )) as { created_at: number; deadline_at: number }[];
    expect(row!.deadline_at - row!.created_at).toBe(9_000_000);
    expect(await env.DB.prepare("SELECT id FROM async_runs WHERE id = ?").bind(started.body.run_id).first()).toBeNull();
  });

  it("never calls the app once the deadline passed while the run was queued: it ends failed, `deadline`", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app, { headers: { "Cancel-After": "5s" } });
    api.clock.advance(5_000);
    const upstream = gatedOutbound();
    expect(await consume(api, started.message, { deps: { outbound: upstream.outbound } })).toMatchObject({
      acked: true,
    });
    expect(upstream.calls).toBe(0);
    const read = await poll(api, started.body.status_url, app.token);
    expect(read.body).toMatchObject({ status: "failed", status_code: 504, error: { code: "deadline" } });
    expect(read.body.result).toMatchObject({ code: "run_deadline", status: 504, run_id: started.body.run_id });
  });

  it("ends the app's call at the deadline once it started: failed, `deadline`, the call made once", async () => {
    const api = client();
    const clock = heldSleep();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const started = await startAsync(api, app, { headers: { "Cancel-After": "1m" } });
    api.clock.advance(10_000);
    const consuming = consume(api, started.message, { deps: { sleep: clock.sleep } });
    await until(() => clock.waits.length > 0);
    // What is left of the deadline at the moment of the call.
    expect(clock.waits[0]!.ms).toBe(50_000);
    await until(() => arrived(key));
    clock.pass();
    expect(await consuming).toMatchObject({ acked: true });
    expect((await whenClosed(key)).closed).toBe(true);
    const read = await poll(api, started.body.status_url, app.token);
    expect(read.body).toMatchObject({ status: "failed", status_code: 504, error: { code: "deadline" } });
    expect(read.body.result).toMatchObject({ code: "run_deadline" });
    expect(await appCalls(started.body.run_id)).toBe(1);
  });
});
