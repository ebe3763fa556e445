import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { PEER, releaseStream, watchKey, watchState } from "../../test/peers";
import { callWith, seedRunnable } from "../../test/runs";
import { UNDER_WAY_MAX_MS } from "./ledger";
import { ledgerOf } from "./ledger-client";
import type { UsageLedger } from "./ledger-object";
import { messagesOf, contentsOf } from "./message";
import type { RunRecord, RunStartRecord } from "./run-record";

/** Runs under way: known to the ledger from their start, closed by their record, followed by events. */

let n = 0;
const newLedger = () => ledgerOf(env, `proj_underway_${Date.now()}_${n++}`);
const start = (at: number, overrides: Partial<RunStartRecord> = {}): RunStartRecord => ({
  run_id: `run_${at.toString(36).padStart(10, "0")}${(n++).toString(36).padStart(6, "0")}`,
  project_id: "proj_underway",
  app_name: "app",
  mode: "sync",
  method: "POST",
  path: "run",
  caller: "sa:x",
  request_id: "req_x",
  created_at: at,
  ...overrides,
});
const recordOf = (s: RunStartRecord): RunRecord => ({
  ...s,
  status_code: 200,
  ending: "answered",
  failure: null,
  duration_ms: 10,
  ttfb_ms: null,
  called_ms: 1,
  answered_ms: 5,
  handed_over_ms: null,
  bytes_in: 0,
  bytes_out: 0,
  webhook: false,
});

describe("the ledger's runs under way", () => {
  it("holds a run from its start to its record, newest first, per caller; a start after its record is not kept", async () => {
    const now = Date.now();
    const ledger = newLedger();
    const a = start(now - 2_000);
    const b = start(now - 1_000, { caller: "sa:y", mode: "wait" });
    await ledger.add([], [], [a, b]);
    expect((await ledger.underWay({ now, limit: 10 })).map((r) => r.run_id)).toEqual([b.run_id, a.run_id]);
    expect((await ledger.underWay({ now, limit: 10, callers: ["sa:x"] })).map((r) => r.run_id)).toEqual([a.run_id]);
    expect(await ledger.underWay({ now, limit: 10, run_id: b.run_id })).toEqual([
      {
        run_id: b.run_id,
        app_name: "app",
        mode: "wait",
        method: "POST",
        path: "run",
        caller: "sa:y",
        request_id: "req_x",
        created_at: b.created_at,
      },
    ]);
    await ledger.add([recordOf(a)]);
    expect((await ledger.underWay({ now, limit: 10 })).map((r) => r.run_id)).toEqual([b.run_id]);
    // A queue message may bring a start after its record (or in the same batch): neither is under way.
    await ledger.add([], [], [a]);
    const c = start(now);
    await ledger.add([recordOf(c)], [], [c]);
    expect((await ledger.underWay({ now, limit: 10 })).map((r) => r.run_id)).toEqual([b.run_id]);
  });

  it("drops a start no record closed after an hour (its owner died), from the list and then from storage", async () => {
    const now = Date.now();
    const ledger = newLedger();
    const lost = start(now - UNDER_WAY_MAX_MS - 1);
    await ledger.add([], [], [lost]);
    expect(await ledger.underWay({ now, limit: 10 })).toEqual([]);
    expect(await ledger.underWay({ now: now - 2, limit: 10 })).toHaveLength(1);
    await runInDurableObject(ledger, (instance: UsageLedger) => expect(instance.ledger.isEmpty()).toBe(false));
    await ledger.purge(now);
    expect(await ledger.underWay({ now: now - 2, limit: 10 })).toEqual([]);
  });

  it("tells its watchers when a batch started or ended runs, not for a batch of refusals alone", async () => {
    const ledger = newLedger();
    const response = await ledger.fetch("https://usage-ledger/watch", { headers: { Upgrade: "websocket" } });
    const socket = response.webSocket!;
    socket.accept();
    const heard: string[] = [];
    socket.addEventListener("message", (event) => {
      heard.push(String(event.data));
    });
    await ledger.add([], [{ project_id: "p", hour: Date.now(), reason: "not_found", count: 1 }]);
    const s = start(Date.now());
    await ledger.add([], [], [s]);
    await ledger.add([recordOf(s)]);
    await runInDurableObject(ledger, async (_instance: UsageLedger, state) => {
      expect(state.getWebSockets()).toHaveLength(1);
    });
    await expect.poll(() => heard).toEqual(["runs", "runs"]);
    socket.close();
  });

  it("travels in the queue's message beside the records (and a message without starts reads as none)", () => {
    const s = start(Date.now());
    const [message] = messagesOf([], [], [s]);
    expect(contentsOf(message)).toEqual({ records: [], refusals: [], starts: [s] });
    expect(contentsOf({ v: 2, records: [] })).toEqual({ records: [], refusals: [], starts: [] });
  });
});

describe("GET /v2/projects/{project_id}/runs/under-way and …/runs/events", () => {
  it("shows a synchronous run while the app holds it, with no status URL, and not once it ended; the events say when", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const events = await api.call(`/v2/projects/${app.projectId}/runs/events`, { token: app.token });
    expect(events.status).toBe(200);
    expect(events.headers.get("content-type")).toBe("text/event-stream");
    const reader = events.body!.getReader();
    const underWay = async () =>
      (
        await api.json<{ data: { run_id: string; mode: string; status_url: string | null }[] }>(
          `/v2/projects/${app.projectId}/runs/under-way`,
          { token: app.token },
        )
      ).body.data;

    const answering = api.call(app.runPath, { method: "POST", token: app.token, body: {} });
    await expect.poll(async () => (await watchState(key)).arrived).toBe(true);
    const runId = (await watchState(key)).runId!;
    // The tests flush at once (USAGE_FLUSH_MS=0): the start is at the ledger before the app answers.
    await expect.poll(underWay).toEqual([expect.objectContaining({ run_id: runId, mode: "sync", status_url: null })]);
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain("event: runs");

    await releaseStream(key);
    const response = await answering;
    expect(response.status).toBe(200);
    await response.text();
    await expect.poll(underWay).toEqual([]);
    let text = "";
    while (!text.includes("event: runs")) text += new TextDecoder().decode((await reader.read()).value);
    const record = await api.call(`/v2/projects/${app.projectId}/runs/${runId}`, { token: app.token });
    expect(record.status).toBe(200);
    await reader.cancel();
  });

  it("refuses a run id that is not one, and a project of someone else's", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const other = await seedRunnable(api);
    const bad = await api.call(`/v2/projects/${app.projectId}/runs/under-way?run_id=nope`, { token: app.token });
    expect(bad.status).toBe(400);
    for (const path of ["runs/under-way", "runs/events"]) {
      const res = await api.call(`/v2/projects/${other.projectId}/${path}`, { token: app.token });
      expect([403, 404]).toContain(res.status);
      await res.text();
    }
  });
});

describe("a start on the run's path", () => {
  /** The USAGE_LEDGER binding, keeping what each `add` carried. */
  function capturingLedgers() {
    const adds: { records: number; starts: number }[] = [];
    const namespace = new Proxy(env.USAGE_LEDGER, {
      get(target, prop) {
        if (prop === "get") {
          return (id: DurableObjectId) => {
            const stub = target.get(id);
            return new Proxy(stub, {
              get(s, name) {
                if (name === "add")
                  return (records: RunRecord[], refusals: [], starts: RunStartRecord[] = []) => {
                    adds.push({ records: records.length, starts: starts.length });
                    return s.add(records, refusals, starts);
                  };
                return Reflect.get(s, name, s) as unknown;
              },
            });
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    return { namespace, adds };
  }

  it("never leaves the isolate when the run's record comes within the flush window: a short run costs the ledger nothing more", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const ledgers = capturingLedgers();
    const bindings = { USAGE_LEDGER: ledgers.namespace, USAGE_FLUSH_MS: "1000" };
    const runs = await Promise.all([1, 2].map(() => callWith(api, bindings, app.runPath, { token: app.token })));
    expect(runs.map((r) => r.status)).toEqual([200, 200]);
    expect(ledgers.adds).toEqual([{ records: 2, starts: 0 }]);
  });
});
