import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { consume, startAsync } from "../../../test/async-runs";
import { eventReader, heldSleeps } from "../../../test/event-streams";
import { type Read, readingD1 } from "../../../test/faulty-d1";
import { client } from "../../../test/helpers";
import { callWith, seedRunnable } from "../../../test/runs";
import { WORD_RESOURCE_MAX } from "./followers";
import { RECHECK_EVERY } from "./stream";

/** A run's status stream against callers who would make it costly for everyone (issue 40). */

let sleeps = heldSleeps();
const api = client({ sleep: (ms) => sleeps.sleep(ms) });
beforeEach(() => {
  sleeps = heldSleeps();
});

/** What the statements on `async_runs` in `reads` answered, in bytes. */
const runBytes = (reads: Read[]) =>
  reads.filter((r) => /"async_runs"/.test(r.sql)).reduce((sum, r) => sum + r.bytes, 0);

describe("attack: status streams that re-read whole runs from the shared database (40.3)", () => {
  it("a stream of a run with a 200 KiB body reads its state, never the body: a few hundred bytes at its start and at each minute's recheck, and the result once, for the end", async () => {
    const app = await seedRunnable(api);
    // 200 KiB of body, kept in the run's D1 row (under INLINE_PAYLOAD_MAX_BYTES); the app echoes it, so
    // the result is as large, past what an owner's word carries: the stream must read it itself.
    const big = "x".repeat(200 * 1024);
    expect(big.length).toBeGreaterThan(WORD_RESOURCE_MAX);
    const started = await startAsync(api, app, { body: { inputs: { big } } });
    const reads: Read[] = [];
    const response = await callWith(api, { DB: readingD1(env.DB, reads) }, new URL(started.body.status_url).pathname, {
      token: app.token,
      headers: { Accept: "text/event-stream" },
    });
    const events = eventReader(response);
    expect((await events.event())?.id).toBe("1");
    // The key, the run's state and its follow: what the run carries is not among them.
    expect(runBytes(reads)).toBeLessThan(2_048);

    for (let minute = 1; minute <= 3; minute++) {
      reads.length = 0;
      for (let i = 0; i < RECHECK_EVERY; i++) {
        await sleeps.waiting();
        sleeps.pass();
        expect(await events.next()).toEqual({ comment: "keep-alive" });
      }
      // The recheck follows the fourth keep-alive.
      const rechecks = () => reads.filter((r) => /"async_runs"/.test(r.sql));
      await vi.waitFor(() => expect(rechecks(), `minute ${minute}`).toHaveLength(1));
      expect(rechecks()[0]!.sql).not.toMatch(/"request_body"|"request_headers"|"result"/);
      expect(runBytes(reads), `minute ${minute}`).toBeLessThan(1_024);
    }

    reads.length = 0;
    await consume(api, started.message);
    let end = await events.event();
    if (end?.id === "2") end = await events.event();
    expect(end?.id).toBe("3");
    expect(JSON.stringify(end!.run)).toContain(big);
    // The result, read once for the last event (its own 200 KiB), and nothing more of that size.
    const resultReads = reads.filter((r) => /"async_runs"/.test(r.sql) && r.bytes > big.length);
    expect(resultReads).toHaveLength(1);
    expect(runBytes(reads)).toBeLessThan(big.length * 1.5);
  });
});
