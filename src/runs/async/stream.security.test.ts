import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { consume, type KeptRead, readingKeepers, startAsync } from "../../../test/async-runs";
import { eventReader, follow, heldSleeps } from "../../../test/event-streams";
import { type Read, readingD1 } from "../../../test/faulty-d1";
import { client } from "../../../test/helpers";
import { callWith, seedRunnable } from "../../../test/runs";
import { FOLLOWERS_PER_RUN_MAX, followersObject, STREAMS_PER_PROJECT_MAX, WORD_RESOURCE_MAX } from "./followers";
import { FULL_RETRY_AFTER_S, RECHECK_EVERY } from "./stream";

/** A run's status stream against callers who would make it costly for everyone (issue 40). */

let sleeps = heldSleeps();
const api = client({ sleep: (ms) => sleeps.sleep(ms) });
beforeEach(() => {
  sleeps = heldSleeps();
});

/** D1's statements on `async_runs` in `reads` (a run of the code before is still read there; a kept run never). */
const d1RunReads = (reads: Read[]) => reads.filter((r) => /"async_runs"/.test(r.sql));
/** What the run's reads answered, in bytes: its keeper's answers, and D1's statements on `async_runs`. */
const runBytes = (kept: KeptRead[], reads: Read[]) =>
  [...kept, ...d1RunReads(reads)].reduce((sum, r) => sum + r.bytes, 0);

describe("attack: status streams that re-read whole runs from the shared database (40.3)", () => {
  it("a stream of a run with a 200 KiB body reads its state, never the body: a few hundred bytes at its start and at each minute's recheck, and the result once, for the end", async () => {
    const app = await seedRunnable(api);
    // 200 KiB of body, kept in the run's D1 row (under INLINE_PAYLOAD_MAX_BYTES); the app echoes it, so
    // the result is as large, past what an owner's word carries: the stream must read it itself.
    const big = "x".repeat(200 * 1024);
    expect(big.length).toBeGreaterThan(WORD_RESOURCE_MAX);
    const started = await startAsync(api, app, { body: { inputs: { big } } });
    // The run is read from its keeper (`runs(op)`), D1 only for a run of the code before: both are watched.
    const reads: Read[] = [];
    const kept: KeptRead[] = [];
    const response = await callWith(
      api,
      { DB: readingD1(env.DB, reads), RUN_KEEPER: readingKeepers(kept) },
      new URL(started.body.status_url).pathname,
      { token: app.token, headers: { Accept: "text/event-stream" } },
    );
    const events = eventReader(response);
    expect((await events.event())?.id).toBe("1");
    // The key, the run's state and its follow: what the run carries is not among them.
    expect(kept.map((r) => r.op)).toContain("follow");
    expect(kept.map((r) => r.op)).not.toContain("byId");
    expect(runBytes(kept, reads)).toBeLessThan(2_048);
    expect(d1RunReads(reads)).toEqual([]);

    for (let minute = 1; minute <= 3; minute++) {
      reads.length = 0;
      kept.length = 0;
      for (let i = 0; i < RECHECK_EVERY; i++) {
        await sleeps.waiting();
        sleeps.pass();
        expect(await events.next()).toEqual({ comment: "keep-alive" });
      }
      // The recheck follows the fourth keep-alive: the run's state, without its payloads.
      await vi.waitFor(() => expect(kept, `minute ${minute}`).toHaveLength(1));
      expect(kept[0]!.op).toBe("stateById");
      expect(d1RunReads(reads), `minute ${minute}`).toEqual([]);
      expect(runBytes(kept, reads), `minute ${minute}`).toBeLessThan(1_024);
    }

    reads.length = 0;
    kept.length = 0;
    await consume(api, started.message);
    let end = await events.event();
    if (end?.id === "2") end = await events.event();
    expect(end?.id).toBe("3");
    expect(JSON.stringify(end!.run)).toContain(big);
    // The result, read once for the last event (its own 200 KiB), and nothing more of that size.
    const resultReads = [...kept, ...d1RunReads(reads)].filter((r) => r.bytes > big.length);
    expect(resultReads).toEqual([expect.objectContaining({ op: "storedResult" })]);
    expect(runBytes(kept, reads)).toBeLessThan(big.length * 1.5);
  });
});

/** The sockets the followers object named `name` holds: a run's hub (its id) or a project's count (`project:` and its id). */
const socketsOf = (name: string) =>
  runInDurableObject(followersObject(env, name), (_instance, state) => Promise.resolve(state.getWebSockets().length));

/** Opens `n` status streams of each of `urls` at once; the answers, in no particular order. */
const followAll = (urls: string[], n: number, token: string) =>
  Promise.all(urls.flatMap((url) => Array.from({ length: n }, () => follow(api, url, token))));

/** Checks a refusal for too many streams: a 429 problem with Retry-After and the bound it met. */
async function expectFull(response: Response, limit: number) {
  expect(response.status).toBe(429);
  expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  expect(response.headers.get("retry-after")).toBe(String(FULL_RETRY_AFTER_S));
  expect(await response.json()).toMatchObject({ status: 429, code: "rate_limited", limit });
}

describe("attack: unbounded followers of a run and of a project (40.4)", () => {
  it("80 simultaneous streams of one run: 8 are served, 72 get a 429 problem with Retry-After, and a stream that leaves frees its place", async () => {
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    const runId = started.body.run_id;
    const answers = await followAll([started.body.status_url], 80, app.token);
    const served = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status !== 200);
    expect(served).toHaveLength(FOLLOWERS_PER_RUN_MAX);
    expect(refused).toHaveLength(80 - FOLLOWERS_PER_RUN_MAX);
    for (const response of refused) await expectFull(response, FOLLOWERS_PER_RUN_MAX);
    // A state change reaches 8 sockets, not 80; the project counts the 8 streams it serves.
    expect(await socketsOf(runId)).toBe(FOLLOWERS_PER_RUN_MAX);
    expect(await socketsOf(`project:${app.projectId}`)).toBe(FOLLOWERS_PER_RUN_MAX);
    const streams = served.map((response) => eventReader(response));
    for (const events of streams) expect((await events.event())?.id).toBe("1");

    // One client leaves: its place is free, without anyone telling the hub or the count.
    await streams.pop()!.cancel();
    await vi.waitFor(async () => expect(await socketsOf(runId)).toBe(FOLLOWERS_PER_RUN_MAX - 1));
    await vi.waitFor(async () => expect(await socketsOf(`project:${app.projectId}`)).toBe(FOLLOWERS_PER_RUN_MAX - 1));
    const again = await follow(api, started.body.status_url, app.token);
    expect(again.status).toBe(200);
    streams.push(eventReader(again));
    await expectFull(await follow(api, started.body.status_url, app.token), FOLLOWERS_PER_RUN_MAX);
    for (const events of streams) await events.cancel();
  }, 60_000);

  it("80 simultaneous streams over 10 runs of one project: 64 are served, 16 get a 429 problem with Retry-After", async () => {
    const app = await seedRunnable(api);
    const urls: string[] = [];
    for (let i = 0; i < 10; i++) urls.push((await startAsync(api, app)).body.status_url);
    // 8 streams a run: each run's own bound holds them all; the project's does not.
    const answers = await followAll(urls, 8, app.token);
    const served = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status !== 200);
    expect(served).toHaveLength(STREAMS_PER_PROJECT_MAX);
    expect(refused).toHaveLength(80 - STREAMS_PER_PROJECT_MAX);
    for (const response of refused) await expectFull(response, STREAMS_PER_PROJECT_MAX);
    expect(await socketsOf(`project:${app.projectId}`)).toBe(STREAMS_PER_PROJECT_MAX);
    // The refused streams leave the hubs they had joined.
    const followers = async () =>
      (await Promise.all(urls.map((url) => socketsOf(url.split("/").pop()!)))).reduce((a, b) => a + b, 0);
    await vi.waitFor(async () => expect(await followers()).toBe(STREAMS_PER_PROJECT_MAX));
    for (const response of served) await response.body!.cancel();
  }, 60_000);
});
