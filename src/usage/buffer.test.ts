import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { consume, startAsync } from "../../test/async-runs";
import { client, testDeps } from "../../test/helpers";
import { callWith, capturingQueue, countingRoundTrips, seedRunnable } from "../../test/runs";
import { QUEUES } from "../platform/triggers";
import { createWorker } from "../worker";
import { flush, holdRecord } from "./buffer";
import { ledgerOf } from "./ledger-client";
import { createScope } from "../platform/scope";
import type { RunRecord } from "./record";

/** The run's side of recording: no D1 on the run's path, records leaving their isolate in batches. */

/** The USAGE_LEDGER binding, counting each ledger call and the records it carries. */
function countingLedgers() {
  const calls: number[] = [];
  const namespace = new Proxy(env.USAGE_LEDGER, {
    get(target, prop) {
      if (prop === "get") {
        return (id: DurableObjectId) => {
          const stub = target.get(id);
          return new Proxy(stub, {
            get(s, name) {
              if (name === "add") return (records: RunRecord[]) => (calls.push(records.length), s.add(records));
              return Reflect.get(s, name, s) as unknown;
            },
          });
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { namespace, calls };
}

describe("recording on the run's path", () => {
  it("adds no D1 round trip to a synchronous run", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const trips = async (recording: string) => {
      const d1 = countingRoundTrips(env.DB);
      const response = await callWith(api, { DB: d1.db, USAGE_RECORDING: recording }, app.runPath, {
        token: app.token,
      });
      expect(response.status).toBe(200);
      await response.text();
      return d1.trips();
    };
    // Warm: the key's and the deployment's caches are filled by the first run.
    await trips("off");
    expect(await trips("on")).toBe(await trips("off"));
  });

  it("sends the runs of one flush window in one ledger call", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const ledgers = countingLedgers();
    const bindings = { USAGE_LEDGER: ledgers.namespace, USAGE_FLUSH_MS: "1000" };
    const runs = await Promise.all([1, 2, 3].map(() => callWith(api, bindings, app.runPath, { token: app.token })));
    expect(runs.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(ledgers.calls).toEqual([3]);
    const listed = await api.json<{ data: { run_id: string }[] }>(`/v2/projects/${app.projectId}/runs`, {
      token: app.token,
    });
    expect(listed.body.data.map((r) => r.run_id).sort()).toEqual(runs.map((r) => r.headers.get("x-run-id")).sort());
  });
});

describe("recording in an invocation no caller waits on", () => {
  it("does not hold an async run's queue invocation open for the flush window", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    expect(started.response.status).toBe(202);
    // A window of ten minutes: were the consumer's invocation to wait for it, `consume` (which waits
    // for the invocation's waitUntil, as the broker does before the next batch) would not return.
    const ended = consume(api, started.message, { bindings: { USAGE_FLUSH_MS: "600000" } }).then(
      () => "ended" as const,
    );
    const held = new Promise((resolve) => setTimeout(() => resolve("held"), 3_000));
    expect(await Promise.race([ended, held])).toBe("ended");
    const listed = await api.json<{ data: { run_id: string }[] }>(`/v2/projects/${app.projectId}/runs?mode=async`, {
      token: app.token,
    });
    expect(listed.body.data.map((r) => r.run_id)).toEqual([started.body.run_id]);
  });
});

let n = 0;
const recordOf = (projectId: string): RunRecord => ({
  run_id: `run_buffer${Date.now().toString(36)}${(n++).toString(36).padStart(6, "0")}`,
  project_id: projectId,
  app_name: "app",
  mode: "sync",
  method: "GET",
  path: "run",
  status_code: 200,
  ending: "answered",
  failure: null,
  duration_ms: 5,
  ttfb_ms: null,
  called_ms: 1,
  answered_ms: 2,
  handed_over_ms: null,
  bytes_in: 0,
  bytes_out: 10,
  caller: "sa:x",
  webhook: false,
  request_id: "req_x",
  created_at: Date.now(),
});

describe("a flush of several projects' runs", () => {
  it("is one queue send, whose consumer gives each project's ledger its own records in one call", async () => {
    const queue = capturingQueue();
    const ledgers = countingLedgers();
    const flushEnv = {
      ...env,
      USAGE_QUEUE: queue.queue,
      USAGE_LEDGER: ledgers.namespace,
      USAGE_FLUSH_MS: "600000",
    } as Env;
    const scope = createScope(flushEnv, { waitUntil: () => undefined }, testDeps());
    const projects = ["proj_buffer_a", "proj_buffer_b", "proj_buffer_c"].map((p) => `${p}_${Date.now()}`);
    const records = [0, 1, 2, 3, 4, 5].map((i) => recordOf(projects[i % 3]!));
    for (const record of records) holdRecord(scope, record);
    await flush(flushEnv);
    expect(ledgers.calls).toEqual([]);
    expect(queue.sent).toHaveLength(1);

    const batch = createMessageBatch(QUEUES.usageRecords, [
      { id: "usage-1", timestamp: new Date(), attempts: 1, body: queue.sent[0] },
    ]);
    const ctx = createExecutionContext();
    await createWorker(testDeps()).queue(batch, { ...env, USAGE_LEDGER: ledgers.namespace } as Env, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["usage-1"]);
    expect(ledgers.calls).toEqual([2, 2, 2]);
    for (const project of projects) {
      const { rows } = await ledgerOf(env, project).list({ limit: 10 });
      expect(rows.map((r) => r.run_id).sort()).toEqual(
        records
          .filter((r) => r.project_id === project)
          .map((r) => r.run_id)
          .sort(),
      );
    }
  });

  it("goes to the ledgers themselves when the queue refuses it", async () => {
    const ledgers = countingLedgers();
    const refusing = { send: async () => Promise.reject(new Error("queue down")) } as unknown as Queue;
    const flushEnv = {
      ...env,
      USAGE_QUEUE: refusing,
      USAGE_LEDGER: ledgers.namespace,
      USAGE_FLUSH_MS: "600000",
    } as Env;
    const scope = createScope(flushEnv, { waitUntil: () => undefined }, testDeps());
    const projects = [`proj_buffer_d_${Date.now()}`, `proj_buffer_e_${Date.now()}`];
    for (const project of projects) holdRecord(scope, recordOf(project));
    await flush(flushEnv);
    expect(ledgers.calls).toEqual([1, 1]);
  });
});
