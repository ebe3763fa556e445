import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { client } from "../../../test/helpers";
import { eventually, sealedWebhook, waitedRun } from "../../../test/keepers";
import { appCalls, PEER, receiver, releaseStream, watchKey } from "../../../test/peers";
import { seedRunnable } from "../../../test/runs";
import { TEST_SECRETS } from "../../../test/secrets";
import { getConfig } from "../../platform/env";
import { callerRunsMax, handedOverRunsMax, KEEPER_BODY_BYTES_MAX } from "./keeper";
import type { KeeperAnswer } from "./message";
import { keyShard, keeperObject } from "./shard";

// The keepers of waited runs against callers who would fill them (issue 40): the cap a webhook's D1
// write let runs past, a keeper's bytes, and one caller (or its handed-over runs) taking everyone's room.

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

const RUNS_MAX = getConfig(env).keeperRunsMax;
const MiB = 1024 * 1024;

/** A keeper of its own for one test, in `projectId`'s name (its hand-overs write that project's rows). */
const keeperNamed = (projectId: string, key: string) => keeperObject(env, `${projectId}:${key}`);

/** The app's request of run `runId`: held by the peer until `hold` is released (none: answered at once). */
const appRequest = (runId: string, hold?: string) =>
  new Request(`${PEER}/upstream/echo${hold ? `?hold=${hold}` : ""}`, { headers: { "X-Run-Id": runId } });

/** Reads an answer's body, so its run ends. */
async function drain(answer: KeeperAnswer) {
  if (answer.kind === "answered") await answer.response.arrayBuffer();
}

describe("attack: waited runs with a webhook past the keeper's cap (40, finding 1)", { timeout: 30_000 }, () => {
  it("40 waited runs with a webhookEndpoint sent at once to one keeper: at most KEEPER_RUNS_MAX app calls, the rest refused", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const hook = await receiver();
    const key = watchKey();
    const keeper = keeperNamed(app.projectId, `flood-${key}`);
    const ids = Array.from({ length: 40 }, (_, i) => `run_flood_${key}_${i}`);
    // Forty callers, so no caller's share is what stops them: only the keeper's count may.
    const answers = ids.map(async (id) =>
      keeper.take(
        appRequest(id, key),
        waitedRun(app.projectId, id, { webhook: await sealedWebhook(id, hook.url, "s3cret") }),
        0,
      ),
    );
    let busy = 0;
    for (const answer of answers) void answer.then((a) => (a.kind === "busy" ? busy++ : null));
    await eventually(async () => busy === 40 - RUNS_MAX, "the runs past the cap are refused");
    const called = async () => (await Promise.all(ids.map(appCalls))).reduce((a, b) => a + b, 0);
    await eventually(async () => (await called()) === RUNS_MAX, "the runs taken are called");
    await releaseStream(key);
    const settled = await Promise.all(answers);
    expect(settled.filter((a) => a.kind === "busy")).toEqual(
      Array.from({ length: 40 - RUNS_MAX }, () => ({ kind: "busy", reason: "runs" })),
    );
    for (const answer of settled) await drain(answer);
    expect(await called()).toBe(RUNS_MAX);
  });

  it("request bodies past the keeper's byte budget: the run that would pass it is refused, a run without a body is taken", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const key = watchKey();
    const keeper = keeperNamed(app.projectId, `bytes-${key}`);
    const full = Math.floor(KEEPER_BODY_BYTES_MAX / (6 * MiB));
    const ids = Array.from({ length: full + 2 }, (_, i) => `run_bytes_${key}_${i}`);
    const taken = ids
      .slice(0, full)
      .map((id) => keeper.take(appRequest(id, key), waitedRun(app.projectId, id, { bytesIn: 6 * MiB }), 0));
    await eventually(async () => (await appCalls(ids[full - 1]!)) === 1, "the runs that fit are called");
    const refused = await keeper.take(
      appRequest(ids[full]!, key),
      waitedRun(app.projectId, ids[full]!, { bytesIn: 6 * MiB }),
      0,
    );
    expect(refused).toEqual({ kind: "busy", reason: "bytes" });
    expect(await appCalls(ids[full]!)).toBe(0);
    const small = await keeper.take(appRequest(ids[full + 1]!), waitedRun(app.projectId, ids[full + 1]!), 0);
    expect(small.kind).toBe("answered");
    await drain(small);
    await releaseStream(key);
    for (const answer of await Promise.all(taken)) await drain(answer);
  });
});

describe("attack: one caller fills a project's keepers (40, finding 2)", { timeout: 30_000 }, () => {
  it("a caller past its share of a keeper is refused first; another caller's waited run is still taken and answered", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const key = watchKey();
    const keeper = keeperNamed(app.projectId, `share-${key}`);
    const share = callerRunsMax(RUNS_MAX);
    const greedy = (i: number) => `run_greedy_${key}_${i}`;
    const held = Array.from({ length: share }, (_, i) =>
      keeper.take(appRequest(greedy(i), key), waitedRun(app.projectId, greedy(i), { caller: "sa:greedy" }), 0),
    );
    await eventually(async () => (await appCalls(greedy(share - 1))) === 1, "the greedy caller's runs are called");
    const more = await keeper.take(
      appRequest(greedy(share), key),
      waitedRun(app.projectId, greedy(share), { caller: "sa:greedy" }),
      0,
    );
    expect(more).toEqual({ kind: "busy", reason: "caller" });
    expect(await appCalls(greedy(share))).toBe(0);
    const other = `run_other_${key}`;
    const answer = await keeper.take(appRequest(other), waitedRun(app.projectId, other, { caller: "sa:other" }), 0);
    expect(answer.kind).toBe("answered");
    await drain(answer);
    await releaseStream(key);
    for (const a of await Promise.all(held)) await drain(a);
  });

  it("handed-over runs fill at most their part: a caller with one of them is refused, a caller who waits is taken", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const key = watchKey();
    const keeper = keeperNamed(app.projectId, `handed-${key}`);
    const share = callerRunsMax(RUNS_MAX);
    // Slow runs of a few callers, each handed over after its 1 s wait, until they fill their part.
    const callers = Array.from({ length: handedOverRunsMax(RUNS_MAX) }, (_, i) => `sa:slow${Math.floor(i / share)}`);
    callers[callers.length - 1] = "sa:one-slow";
    const slow = callers.map((caller, i) => {
      const id = `run_slow_${key}_${i}`;
      return keeper.take(appRequest(id, key), waitedRun(app.projectId, id, { caller, seconds: 1 }), 0);
    });
    const handed = await Promise.all(slow);
    expect(handed.every((a) => a.kind === "handed_over")).toBe(true);
    // Below its share and the keeper below its count, but its runs outlast their wait: refused.
    const again = `run_again_${key}`;
    expect(await keeper.take(appRequest(again), waitedRun(app.projectId, again, { caller: "sa:one-slow" }), 0)).toEqual(
      {
        kind: "busy",
        reason: "handed_over",
      },
    );
    expect(await appCalls(again)).toBe(0);
    // A caller whose runs are answered within their wait still gets the room left.
    const waiter = `run_waiter_${key}`;
    const answer = await keeper.take(appRequest(waiter), waitedRun(app.projectId, waiter, { caller: "sa:waiter" }), 0);
    expect(answer.kind).toBe("answered");
    await drain(answer);
    await releaseStream(key);
  });
});

describe("a full keeper through the Worker (40, Must 3)", { timeout: 30_000 }, () => {
  it("a waited run whose keeper is full gets the 503 problem with Retry-After and X-Run-Id, and its app is not called", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}`, "custom");
    // A JWT caller, whose id the test knows (`jwt:<sub>`): its key puts its run in shard 0.
    const now = Math.floor(api.clock.now().getTime() / 1000);
    const token = await sign(
      { project_id: app.projectId, sub: `full-${key}`, exp: now + 3600 },
      TEST_SECRETS.JWT_SECRET,
      "HS256",
    );
    let idempotencyKey = "k0";
    for (let i = 1; keyShard(`jwt:full-${key}`, idempotencyKey) !== 0; i++) idempotencyKey = `k${i}`;
    // Shard 0's keeper filled by other callers' runs, held by the app.
    const keeper = keeperNamed(app.projectId, "0");
    const fill = Array.from({ length: RUNS_MAX }, (_, i) => {
      const id = `run_fill_${key}_${i}`;
      return keeper.take(appRequest(id, key), waitedRun(app.projectId, id), 0);
    });
    await eventually(async () => (await appCalls(`run_fill_${key}_${RUNS_MAX - 1}`)) === 1, "the keeper is full");
    const response = await api.call(app.runPath, {
      token,
      headers: { Prefer: "wait=5", "Idempotency-Key": idempotencyKey },
    });
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("1");
    expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    const runId = response.headers.get("x-run-id")!;
    expect(await response.json()).toMatchObject({ code: "service_unavailable", status: 503, run_id: runId });
    expect(await appCalls(runId)).toBe(0);
    await releaseStream(key);
    for (const answer of await Promise.all(fill)) await drain(answer);
  });
});
