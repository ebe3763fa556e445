import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { callWith, countingRoundTrips, seedRunnable } from "../../test/runs";
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
      const response = await callWith(api, { DB: d1.db, USAGE_RECORDING: recording }, app.runPath, { token: app.token });
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
    const listed = await api.json<{ data: { run_id: string }[] }>(`/v2/projects/${app.projectId}/runs`, { token: app.token });
    expect(listed.body.data.map((r) => r.run_id).sort()).toEqual(runs.map((r) => r.headers.get("x-run-id")).sort());
  });
});
