import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  consume,
  gatedOutbound,
  type KeptRead,
  keptRows,
  keptRun,
  keptSql,
  poll,
  readingKeepers,
  startAsync,
} from "../../../test/async-runs";
import { eventReader, follow, heldSleeps } from "../../../test/event-streams";
import { client } from "../../../test/helpers";
import { RECHECK_EVERY } from "./stream";
import { createDb } from "../../db/client";
import { insertRun } from "./store";
import { forgetLegacyRuns } from "./rows";
import { followersObject, WORD_RESOURCE_MAX } from "./followers";
import { faultyD1 } from "../../../test/faulty-d1";
import { callWith, seedRunnable } from "../../../test/runs";

// Keep-alives come when a test passes a sleep, never by the wall clock; each test has its own sleeps
// (a stream of an earlier test may still hold one).
let sleeps = heldSleeps();
const api = client({ sleep: (ms) => sleeps.sleep(ms) });

beforeEach(() => {
  sleeps = heldSleeps();
  // Interrupted runs log an error line by design.
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** The hub's own count of the streams that follow `runId` (telling them a word nobody acts on). */
const followersOf = (runId: string) => followersObject(env, runId).changed("queued") as Promise<number>;

/** Hands `message` to the consumer with the app's answer held: resolves once the app is called. */
async function consumeHeld(message: unknown) {
  const upstream = gatedOutbound();
  upstream.hold();
  const consuming = consume(api, message, { deps: { outbound: upstream.outbound } });
  await upstream.reached;
  return {
    /** Lets the app answer; resolves once the consumer is done. */
    release: async () => {
      upstream.release();
      await consuming;
    },
    get calls() {
      return upstream.calls;
    },
  };
}

describe("a run's status as an event stream (Accept: text/event-stream)", () => {
  it("sends the run resource at each change of state (queued, running, its end), then closes", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const response = await follow(api, started.body.status_url, app.token);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(response.headers.get("x-run-id")).toBe(started.body.run_id);
    const events = eventReader(response);
    expect(await events.event()).toMatchObject({
      id: "1",
      run: { run_id: started.body.run_id, status: "queued", started_at: null, result: null },
    });

    const upstream = await consumeHeld(started.message);
    // Told by the consumer's claim while the app is still being called, not by any polling.
    expect(await events.event()).toMatchObject({ id: "2", run: { status: "running", result: null } });
    await upstream.release();
    const end = await events.event();
    expect(end).toMatchObject({ id: "3", run: { status: "succeeded", status_code: 200 } });
    // The very resource a poll answers, its result included.
    expect(end!.run).toEqual((await poll(api, started.body.status_url, app.token)).body);
    expect(await events.next()).toBeNull();
    expect(upstream.calls).toBe(1);
  });

  it("sends the run as its owner wrote it, without reading it again (from its keeper or D1)", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    let readsFail = false;
    const refused: Parameters<typeof faultyD1>[2] = [];
    const db = faultyD1(env.DB, (sql) => readsFail && /^\s*select/i.test(sql), refused);
    // The stream's calls on the run's keeper (the consumer has a keeper binding of its own).
    const kept: KeptRead[] = [];
    const response = await callWith(
      api,
      { DB: db, RUN_KEEPER: readingKeepers(kept) },
      new URL(started.body.status_url).pathname,
      { token: app.token, headers: { Accept: "text/event-stream" } },
    );
    const events = eventReader(response);
    expect((await events.event())?.id).toBe("1");
    // It read the run and marked it followed before its first event; from here it reads it no more.
    expect(kept.map((r) => r.op)).toContain("follow");
    kept.length = 0;
    // From here a read of D1 by the stream would fail (and close it early, without events).
    readsFail = true;
    const upstream = await consumeHeld(started.message);
    expect(await events.event()).toMatchObject({ id: "2", run: { status: "running" } });
    await upstream.release();
    const end = await events.event();
    expect(end?.id).toBe("3");
    expect(end!.run).toEqual((await poll(api, started.body.status_url, app.token)).body);
    expect(await events.next()).toBeNull();
    expect(refused).toEqual([]);
    expect(kept).toEqual([]);
  });

  it("reads a run whose result is too large for its owner's word, and sends it whole", async () => {
    const app = await seedRunnable(api);
    const big = "x".repeat(WORD_RESOURCE_MAX + 1000);
    const started = await startAsync(api, app, { body: { inputs: { big } } });
    const events = eventReader(await follow(api, started.body.status_url, app.token));
    expect((await events.event())?.id).toBe("1");
    await consume(api, started.message);
    let end = await events.event();
    if (end?.id === "2") end = await events.event();
    expect(end?.id).toBe("3");
    expect(JSON.stringify(end!.run)).toContain(big);
    expect(end!.run).toEqual((await poll(api, started.body.status_url, app.token)).body);
  });

  it("sends a comment every 15 s while nothing changes, and reads the run again every fourth one (a word its owner never gave)", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const events = eventReader(await follow(api, started.body.status_url, app.token));
    expect((await events.event())?.id).toBe("1");
    // Moved in its keeper behind the stream's back: no owner told the hub.
    expect(await keptRows(started.body).claim(started.body.run_id, "elsewhere", api.clock.now())).toBeDefined();
    for (let i = 1; i < RECHECK_EVERY; i++) {
      await sleeps.waiting();
      sleeps.pass();
      expect(await events.next()).toEqual({ comment: "keep-alive" });
    }
    await sleeps.waiting();
    sleeps.pass();
    expect(await events.next()).toEqual({ comment: "keep-alive" });
    expect(await events.event()).toMatchObject({ id: "2", run: { status: "running" } });
    await events.cancel();
  });

  it("resumes after Last-Event-ID: a state already sent is not sent again, a later one is", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const events = eventReader(await follow(api, started.body.status_url, app.token, "1"));
    // Nothing to send yet: the first thing the stream says is its keep-alive.
    await sleeps.waiting();
    sleeps.pass();
    expect(await events.next()).toEqual({ comment: "keep-alive" });
    const upstream = await consumeHeld(started.message);
    // The reconnected stream gets what came after its last event, and no second "queued".
    expect(await events.event()).toMatchObject({ id: "2", run: { status: "running" } });
    await upstream.release();
    expect((await events.event())?.id).toBe("3");
    expect(await events.next()).toBeNull();
  });

  it("answers an ended run with its last event and closes; asked again with that event's id, 204 (an EventSource stops)", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    await consume(api, started.message);
    const whole = eventReader(await follow(api, started.body.status_url, app.token));
    expect(await whole.event()).toMatchObject({ id: "3", run: { status: "succeeded" } });
    expect(await whole.next()).toBeNull();
    const fromRunning = eventReader(await follow(api, started.body.status_url, app.token, "2"));
    expect((await fromRunning.event())?.id).toBe("3");
    const done = await follow(api, started.body.status_url, app.token, "3");
    expect(done.status).toBe(204);
    expect(await done.text()).toBe("");
    // Nothing of an ended run is followed: no hub was ever joined.
    expect((await keptRun(started.body))?.followed).toBe(false);
  });

  it("refuses a Last-Event-ID that is none of its ids with a 400 naming the header", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    for (const bad of ["0", "4", "x", "2x", "-1"]) {
      const res = await api.json(new URL(started.body.status_url).pathname, {
        token: app.token,
        headers: { Accept: "text/event-stream", "Last-Event-ID": bad },
      });
      expect(res.status, bad).toBe(400);
      expect(res.body.errors, bad).toEqual([expect.objectContaining({ location: "header", field: "Last-Event-ID" })]);
    }
  });

  it("sends a cancelled run's end when it is cancelled while followed", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const events = eventReader(await follow(api, started.body.status_url, app.token));
    expect((await events.event())?.id).toBe("1");
    expect(
      (await api.json(new URL(started.body.status_url).pathname, { method: "DELETE", token: app.token })).status,
    ).toBe(200);
    expect(await events.event()).toMatchObject({ id: "3", run: { status: "cancelled" } });
    expect(await events.next()).toBeNull();
  });

  it("sends an interrupted run's end (a redelivered message finds its own claim)", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    expect(await keptRows(started.body).claim(started.body.run_id, "arm-dead", api.clock.now())).toBeDefined();
    const events = eventReader(await follow(api, started.body.status_url, app.token));
    expect((await events.event())?.run.status).toBe("running");
    await consume(api, started.message, { id: "arm-dead", attempts: 2 });
    expect(await events.event()).toMatchObject({ id: "3", run: { status: "failed", error: { code: "interrupted" } } });
  });

  it("reads the run again when its hub is lost, joins a new one, and goes on", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const events = eventReader(await follow(api, started.body.status_url, app.token));
    expect((await events.event())?.id).toBe("1");
    // Claimed behind the stream's back, then the hub restarts (its sockets closed): no word ever came.
    expect(await keptRows(started.body).claim(started.body.run_id, "arm-lost-hub", api.clock.now())).toBeDefined();
    const hub = followersObject(env, started.body.run_id);
    await runInDurableObject(hub, (_instance, state) => {
      for (const socket of state.getWebSockets()) socket.close(1012, "restarting");
    });
    expect(await events.event()).toMatchObject({ id: "2", run: { status: "running" } });
    await vi.waitFor(async () => expect(await followersOf(started.body.run_id)).toBe(1));
    await consume(api, started.message, { id: "arm-lost-hub", attempts: 2 });
    expect(await events.event()).toMatchObject({ id: "3", run: { status: "failed" } });
    expect(await events.next()).toBeNull();
  });

  it("closes, for its client to resume, when its project's count of streams restarts (it is no longer counted)", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const events = eventReader(await follow(api, started.body.status_url, app.token));
    expect((await events.event())?.id).toBe("1");
    const count = followersObject(env, `project:${app.projectId}`);
    await runInDurableObject(count, (_instance, state) => {
      for (const socket of state.getWebSockets()) socket.close(1012, "restarting");
    });
    // `retry: 1000`, then the end of the stream; the run's hub is left too.
    expect(await events.next()).toBeNull();
    await vi.waitFor(async () => expect(await followersOf(started.body.run_id)).toBe(0));
    // Reconnected, the stream is counted again and goes on from its last event.
    const resumed = eventReader(await follow(api, started.body.status_url, app.token, "1"));
    await consume(api, started.message);
    let end = await resumed.event();
    if (end?.id === "2") end = await resumed.event();
    expect(end?.id).toBe("3");
  });

  it("follows a run kept in D1 before runs moved to their keepers: its changes reach the stream", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const runId = started.body.run_id;
    // The run as the code before kept it: in D1; its keeper has none.
    const row = await keptRun(started.body);
    expect(await insertRun(createDb(env.DB), row!)).toBe(true);
    await keptSql(started.body, "DELETE FROM async_runs WHERE id = ?", runId);
    forgetLegacyRuns();
    try {
      const events = eventReader(await follow(api, started.body.status_url, app.token));
      expect((await events.event())?.id).toBe("1");
      const upstream = await consumeHeld(started.message);
      expect(await events.event()).toMatchObject({ id: "2", run: { status: "running" } });
      await upstream.release();
      const end = await events.event();
      expect(end).toMatchObject({ id: "3", run: { status: "succeeded", status_code: 200 } });
      expect(end!.run).toEqual((await poll(api, started.body.status_url, app.token)).body);
      expect(await events.next()).toBeNull();
      const d1 = await env.DB.prepare("SELECT status, followed FROM async_runs WHERE id = ?").bind(runId).first();
      expect(d1).toEqual({ status: "succeeded", followed: 1 });
      expect(await keptRun(started.body)).toBeUndefined();
    } finally {
      await env.DB.prepare("DELETE FROM async_runs WHERE id = ?").bind(runId).run();
      forgetLegacyRuns();
    }
  });

  it("costs a run nobody follows nothing: its owner never reaches a hub", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    let reached = 0;
    const counting = {
      idFromName: (name: string) => name,
      get: () => {
        reached++;
        throw new Error("no hub for a run nobody follows");
      },
    };
    await consume(api, started.message, { bindings: { RUN_FOLLOWERS: counting } });
    expect((await poll(api, started.body.status_url, app.token)).body.status).toBe("succeeded");
    expect(reached).toBe(0);
    expect((await keptRun(started.body))?.followed).toBe(false);
  });

  it("leaves the hub when its client hangs up", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const events = eventReader(await follow(api, started.body.status_url, app.token));
    expect((await events.event())?.id).toBe("1");
    expect(await followersOf(started.body.run_id)).toBe(1);
    await events.cancel();
    await vi.waitFor(async () => expect(await followersOf(started.body.run_id)).toBe(0));
  });

  it("reads the run once as JSON when the caller prefers JSON or refuses event streams", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    for (const accept of [
      "application/json",
      "text/event-stream;q=0, application/json",
      "application/json, text/event-stream;q=0.5",
      "*/*",
    ]) {
      const res = await api.call(new URL(started.body.status_url).pathname, {
        token: app.token,
        headers: { Accept: accept },
      });
      expect(res.headers.get("content-type"), accept).toBe("application/json");
      expect((await res.json()) as object, accept).toMatchObject({ status: "queued" });
    }
  });
});
