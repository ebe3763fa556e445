import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { consumeBatch, poll, startAsync } from "../../../test/async-runs";
import { client } from "../../../test/helpers";
import { wranglerEnvironments } from "../../../test/wrangler";
import { seedRunnable } from "../../../test/runs";
import { QUEUES } from "../../platform/triggers";
import { RUNS_SIDE_BY_SIDE_MAX, SUBREQUESTS_PER_INVOCATION, SUBREQUESTS_PER_RUN } from "./consumer";

/**
 * The async-runs consumer takes its runs a batch at a time (consumer.ts): side by side, each on its own
 * from its claim to its ack, within the connections and subrequests of one invocation.
 */

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** An app's upstream that holds every call until `count` calls are in at once, then lets them all answer. */
function upstreamMeeting(count: number) {
  let calls = 0;
  let meet: () => void = () => undefined;
  const met = new Promise<void>((resolve) => (meet = resolve));
  return {
    outbound: {
      fetch: async (request: Request) => {
        if (++calls >= count) meet();
        await met;
        return new Response(JSON.stringify({ ok: true, path: new URL(request.url).pathname }), {
          headers: { "Content-Type": "application/json" },
        });
      },
    },
    get calls() {
      return calls;
    },
  };
}

describe("the async-runs consumer's batches", () => {
  it("runs a batch's runs side by side: each app is called before any answers, and each run is acked on its own", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await Promise.all([1, 2, 3].map(() => startAsync(api, app)));
    // One after another, the first call would wait for the other two forever (the test's timeout).
    const upstream = upstreamMeeting(3);
    const consumed = await consumeBatch(
      api,
      started.map((s) => s.message),
      { deps: { outbound: upstream.outbound } },
    );
    expect(consumed.acked).toEqual([true, true, true]);
    expect(upstream.calls).toBe(3);
    for (const s of started)
      expect((await poll(api, s.body.status_url, app.token)).body).toMatchObject({ status: "succeeded" });
  });

  it("sends back to the queue what passes its runs side by side, unclaimed: the app is never called for them", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await Promise.all(Array.from({ length: RUNS_SIDE_BY_SIDE_MAX + 2 }, () => startAsync(api, app)));
    const upstream = upstreamMeeting(RUNS_SIDE_BY_SIDE_MAX);
    const consumed = await consumeBatch(
      api,
      started.map((s) => s.message),
      { deps: { outbound: upstream.outbound } },
    );
    const ran = RUNS_SIDE_BY_SIDE_MAX;
    expect(consumed.acked).toEqual([...Array<boolean>(ran).fill(true), false, false]);
    expect(consumed.retried).toEqual([...Array<boolean>(ran).fill(false), true, true]);
    expect(upstream.calls).toBe(ran);
    for (const s of started.slice(ran))
      expect((await poll(api, s.body.status_url, app.token)).body).toMatchObject({ status: "queued" });
  });
});

describe("wrangler.toml agrees with the async-runs consumer's plan", () => {
  const environments = wranglerEnvironments();

  it.each(environments)(
    "%s: a batch fits 6 connections and Workers Free's 50 subrequests, is never held to fill, and gives up into its dead letters",
    (_, section) => {
      const consumers = section.queues?.consumers ?? [];
      const runs = consumers.find((c) => c.queue === QUEUES.asyncRuns)!;
      expect(runs).toBeDefined();
      // Each run holds one connection at a time, the usage flush one.
      expect(runs.max_batch_size).toBeLessThanOrEqual(RUNS_SIDE_BY_SIDE_MAX);
      expect(RUNS_SIDE_BY_SIDE_MAX + 1).toBeLessThanOrEqual(6);
      // When no call fails; what is left is for retries.
      expect(runs.max_batch_size * SUBREQUESTS_PER_RUN + SUBREQUESTS_PER_INVOCATION).toBeLessThanOrEqual(50);
      expect(runs.max_batch_size).toBeGreaterThan(1);
      expect(runs.max_batch_timeout).toBe(0);
      expect(runs.dead_letter_queue).toBe(QUEUES.asyncRunDeadLetters);
      // Dead letters one at a time: each settles a run as its last retry would have.
      expect(consumers.find((c) => c.queue === QUEUES.asyncRunDeadLetters)?.max_batch_size).toBe(1);
    },
  );
});
