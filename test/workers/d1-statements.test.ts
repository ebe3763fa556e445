import {
  createExecutionContext,
  createMessageBatch,
  getQueueResult,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { newId } from "../../src/platform/ids";
import { getConfig } from "../../src/platform/env";
import { createScope } from "../../src/platform/scope";
import { logDbOf } from "../../src/webhooks/log";
import { QUEUES } from "../../src/platform/triggers";
import { Keeper } from "../../src/runs/wait/keeper";
import { KEEPER_SHARDS } from "../../src/runs/wait/shard";
import { idInShard } from "../../src/platform/shards";
import { usageOutcomes } from "../../src/usage/record";
import { Lane } from "../../src/webhooks/lane";
import { laneName, laneObject } from "../../src/webhooks/message";
import { type StatementLog, statementLog, summaryOf } from "../d1-statements";
import { until } from "../deliveries";
import { type Client, client, fakeClock, testDeps } from "../helpers";
import { keeperOf } from "../keepers";
import { PEER, receiver } from "../peers";
import { capturingQueue, seedRunnable } from "../runs";

/**
 * The D1 statements and round trips one run of each mode makes once the isolate's caches are warm
 * (issue 41: a run of any mode, with or without a webhook, is to leave nothing in D1 and make no D1
 * round trip on its path). It runs twice: with the delivery log in each project's objects (the default),
 * where every mode makes none, and in D1 (`DELIVERY_LOG_STORE=d1`, the store kept to roll back to:
 * vitest.config.ts). A ratchet: a mode at 0 stays at 0; a mode that still uses D1 may only go down from
 * today's count, and only on the tables it uses today.
 *
 * Counted, on one recording binding per place (test/d1-statements.ts), from the moment the run's request
 * is sent until the run and everything it started have settled:
 * - the Worker's invocation: the run's path, then its `waitUntil` work (a webhook's hand-off to its lane);
 * - the async runs' consumer, run here on the message the Worker queued, as the queue would run it;
 * - the project's Durable Objects that work for a run: its receiver's lane (its `accept`, and the alarm
 *   that makes the attempts) and its keepers (all 8 shards, their alarms included), each rebuilt on the
 *   recording binding before the first run, as lanes.test.ts rebuilds a lane on a slow D1.
 * "On the path" is what ran before the caller had its whole answer (101 for a WebSocket); the rest ran
 * after it (waitUntil, the consumer, the lane, a keeper ending its run).
 *
 * Left out, because they hold no D1 binding on a run's way: the usage records (the isolate's buffer, the
 * `usage-records` queue and the projects' ledgers keep them in Durable Object storage) and a run's
 * followers (only a followed run has them). Not a run's either: the crons' sweeps, and the
 * `webhook-deliveries` queue's consumer, which sees a delivery only when its lane could not take it.
 */

type App = Awaited<ReturnType<typeof seedRunnable>>;

interface World {
  api: Client;
  app: App;
  log: StatementLog;
  /** A receiver that answers 200, for the modes with a webhook. */
  hook: string;
  /** The clock of the receiver's lane, by which it ages its copy of the receiver's state. */
  laneClock: ReturnType<typeof fakeClock>;
}

/**
 * From the warm-up's delivery to the measured one, on the lane's clock: a receiver that gets a delivery
 * every 10 s. Its lane's copy of the receiver's state, read for the warm-up, is that old at the measured
 * run: more than the second it was once trusted for (when every such delivery read it again), within
 * RECEIVER_STATE_TTL_MS (receiver-controls.ts).
 */
const BETWEEN_DELIVERIES_MS = 10_000;

/** A project with an app at `origin`, its receiver's lane and its keepers on the recording binding. */
async function worldOf(origin?: string): Promise<World> {
  const api = client();
  const app = await seedRunnable(api, origin);
  const log = statementLog(env.DB);
  const hook = (await receiver([{ status: 200 }])).url;
  const laneClock = fakeClock(new Date().toISOString());
  await runInDurableObject(
    laneObject(env, laneName({ projectId: app.projectId, endpoint: hook })),
    (instance: { lane: Lane }, state) => {
      instance.lane = new Lane(state, { ...env, DB: log.binding("lane") }, testDeps({ now: laneClock.now }));
    },
  );
  for (let shard = 0; shard < KEEPER_SHARDS; shard++)
    await runInDurableObject(
      keeperOf(app.projectId, idInShard(newId("run"), shard)),
      (instance: { keeper: Keeper }, state) => {
        instance.keeper = new Keeper(state, { ...env, DB: log.binding("keeper") }, testDeps(), usageOutcomes);
      },
    );
  return { api, app, log, hook, laneClock };
}

/**
 * Sends a run's request to the Worker on the recording binding; its answer read whole (the end of the
 * run's path), then the invocation's `waitUntil` work waited for.
 */
async function send(
  world: World,
  query: string,
  init: RequestInit,
  bindings: Partial<Record<keyof Env, unknown>> = {},
): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${world.app.token}`);
  const ctx = createExecutionContext();
  const response = await world.api.worker.fetch(
    new Request(`http://localhost${world.app.runPath}${query}`, { ...init, headers }),
    { ...env, DB: world.log.binding("worker"), ...bindings } as Env,
    ctx,
  );
  if (response.webSocket) {
    world.log.answered();
    await echoed(response.webSocket);
  } else {
    await response.text();
    world.log.answered();
  }
  await waitOnExecutionContext(ctx);
  return response;
}

/** A message sent through the app's WebSocket and its echo back; then the socket closed. */
async function echoed(ws: WebSocket): Promise<void> {
  ws.accept();
  const reply = new Promise<string>((resolve) =>
    ws.addEventListener("message", (event) => resolve(String(event.data))),
  );
  ws.send("ping");
  expect(JSON.parse(await reply)).toMatchObject({ echo: "ping" });
  ws.close();
}

const post = (headers: Record<string, string> = {}): RequestInit => ({
  method: "POST",
  headers: { "Content-Type": "application/json", ...headers },
  body: JSON.stringify({ inputs: { n: 1 } }),
});

const webhookQuery = (world: World) => `webhookEndpoint=${encodeURIComponent(world.hook)}`;

/** Waits until every delivery of `runId` is delivered and its lane holds none (a lane forgets a delivery after its last write). */
async function delivered(world: World, runId: string): Promise<void> {
  const lane = laneObject(env, laneName({ projectId: world.app.projectId, endpoint: world.hook }));
  // Its record is in D1, or in its run's log (DELIVERY_LOG_STORE=objects: webhooks/log.ts).
  const records = logDbOf(createScope(env, createExecutionContext(), testDeps()), world.app.projectId, runId).$client;
  const state = () =>
    Promise.all([
      records.prepare("SELECT status FROM webhook_deliveries WHERE run_id = ?").bind(runId).all<{ status: string }>(),
      lane.pending(),
    ]).then(([rows, pending]) => ({ statuses: rows.results.map((r) => r.status), pending: pending.length }));
  const settled = await until(
    state,
    (s) => s.statuses.length > 0 && s.statuses.every((status) => status === "delivered") && s.pending === 0,
    5_000,
  );
  expect(settled).toEqual({ statuses: ["delivered"], pending: 0 });
}

/** Waits until the keeper of `runId` has forgotten it (its record goes once the run ended and its delivery was handed on). */
async function forgotten(world: World, runId: string): Promise<void> {
  const kept = () =>
    runInDurableObject(
      keeperOf(world.app.projectId, runId),
      (_instance, state) => state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM kept_runs").one().n,
    );
  expect(await until(kept, (n) => n === 0, 5_000)).toBe(0);
}

async function syncRun(world: World, query = ""): Promise<string> {
  const response = await send(world, query, post());
  expect(response.status).toBe(200);
  return response.headers.get("x-run-id")!;
}

async function waitedRun(world: World, query = ""): Promise<string> {
  const response = await send(world, query, post({ Prefer: "wait=5" }));
  expect(response.status).toBe(200);
  expect(response.headers.get("preference-applied")).toBe("wait=5");
  const runId = response.headers.get("x-run-id")!;
  await forgotten(world, runId);
  return runId;
}

let messages = 0;

/** An async run: accepted by the Worker (its queue message kept), then run by the consumer on the recording binding. */
async function asyncRun(world: World, query = ""): Promise<string> {
  const queue = capturingQueue();
  const response = await send(world, `?async=true${query ? `&${query}` : ""}`, post(), {
    ASYNC_RUN_QUEUE: queue.queue,
  });
  expect(response.status).toBe(202);
  const batch = createMessageBatch(QUEUES.asyncRuns, [
    { id: `d1-statements-${messages++}`, timestamp: new Date(), attempts: 1, body: queue.sent[0] },
  ]);
  const ctx = createExecutionContext();
  await world.api.worker.queue(batch, { ...env, DB: world.log.binding("consumer") } as Env, ctx);
  expect((await getQueueResult(batch, ctx)).explicitAcks).toHaveLength(1);
  return response.headers.get("x-run-id")!;
}

async function socketRun(world: World, query = ""): Promise<string> {
  const response = await send(world, query, { headers: { Upgrade: "websocket" } });
  expect(response.status).toBe(101);
  return response.headers.get("x-run-id")!;
}

/** What a mode's run may do to D1 today: the ratchet's bounds. */
interface Budget {
  /** Statements and round trips in all, from the request until the run and its work elsewhere settled. */
  statements: number;
  roundTrips: number;
  /** Statements and round trips before the caller had its whole answer. */
  onPath: number;
  roundTripsOnPath: number;
  /** The tables its statements may write (INSERT INTO, UPDATE, DELETE FROM) and read (FROM, JOIN). */
  writes: string[];
  reads: string[];
}

const NOTHING: Budget = { statements: 0, roundTrips: 0, onPath: 0, roundTripsOnPath: 0, writes: [], reads: [] };

/**
 * A webhook's delivery: nothing in D1 with the delivery log in the project's objects (the default). With
 * `DELIVERY_LOG_STORE=d1`, its `pending` record written before the app is called (on the path: by the
 * Worker, or by the keeper of a waited run), then its lane's claim of attempt 1 and the attempt's
 * outcome: 3 statements in 3 round trips, 1 on the path. Its receiver's state is no read of its own
 * either way: the lane is told each change and reads `webhook_receivers` again only once its copy is
 * RECEIVER_STATE_TTL_MS (a minute) old (receiver-controls.ts), once a minute per receiver at most.
 */
const DELIVERY: Budget =
  getConfig(env).deliveryLogStore === "objects"
    ? // Recorded in the project's log (this file runs in both vitest projects): D1 untouched.
      NOTHING
    : {
        statements: 3,
        roundTrips: 3,
        onPath: 1,
        roundTripsOnPath: 1,
        writes: ["webhook_attempts", "webhook_deliveries"],
        reads: ["projects", "webhook_deliveries"],
      };

interface Mode {
  name: string;
  /** The app's origin, when not the peer's echo app. */
  origin?: string;
  /** One run, and the wait until it and its work elsewhere have settled. */
  run: (world: World) => Promise<unknown>;
  today: Budget;
}

const MODES: Mode[] = [
  { name: "synchronous", run: (w) => syncRun(w), today: NOTHING },
  {
    name: "synchronous with a webhook",
    run: async (w) => delivered(w, await syncRun(w, `?${webhookQuery(w)}`)),
    today: DELIVERY,
  },
  { name: "Prefer: wait", run: (w) => waitedRun(w), today: NOTHING },
  {
    name: "Prefer: wait with a webhook",
    run: async (w) => delivered(w, await waitedRun(w, `?${webhookQuery(w)}`)),
    today: DELIVERY,
  },
  {
    name: "async",
    run: (w) => asyncRun(w),
    // Was 3 statements (the run's row on the path, the consumer's claim and its end): the run is kept by
    // its keeper now (runs/async/kept-runs.ts), and D1 is asked only whether it still holds runs of the
    // code before, at most once a minute per isolate (runs/async/rows.ts `legacyRuns`).
    today: NOTHING,
  },
  {
    name: "async with a webhook",
    run: async (w) => delivered(w, await asyncRun(w, webhookQuery(w))),
    // Was 6 in 5 round trips: the async run's 3 left D1. What is left is its delivery's, as DELIVERY
    // counts it, but none of it on the caller's path: the keeper writes the `pending` record when the
    // consumer ends the run.
    today: { ...DELIVERY, onPath: 0, roundTripsOnPath: 0 },
  },
  { name: "WebSocket", origin: `${PEER}/upstream/ws`, run: (w) => socketRun(w), today: NOTHING },
  // A WebSocket run has no webhook (admission drops the parameter): still a mode a caller may ask for.
  {
    name: "WebSocket with a webhook",
    origin: `${PEER}/upstream/ws`,
    run: (w) => socketRun(w, `?${webhookQuery(w)}`),
    today: NOTHING,
  },
];

describe("D1 statements of one run, per mode, once the isolate's caches are warm (issue 41)", () => {
  it.each(MODES)("$name", async ({ origin, run, today }) => {
    const world = await worldOf(origin);
    // The warm-up: the token and the deployment, last_used_at, the lane's settings and receiver's state.
    await run(world);
    world.log.clear();
    world.laneClock.advance(BETWEEN_DELIVERIES_MS);
    await run(world);
    const { statements, roundTrips } = world.log;
    if (today.statements === 0) {
      expect(statements).toEqual([]);
      expect(roundTrips).toEqual([]);
      return;
    }
    const summary = summaryOf(statements, roundTrips);
    const ran = statements.map((s) => `${s.source}${s.onPath ? " (on the path)" : ""}: ${s.sql}`).join("\n");
    for (const count of ["statements", "roundTrips", "onPath", "roundTripsOnPath"] as const)
      expect(summary[count], `${count}:\n${ran}`).toBeLessThanOrEqual(today[count]);
    // Only the tables it uses today: a mode that writes another table has moved backwards.
    expect(today.writes, ran).toEqual(expect.arrayContaining(summary.writes));
    expect(today.reads, ran).toEqual(expect.arrayContaining(summary.reads));
  });
});
