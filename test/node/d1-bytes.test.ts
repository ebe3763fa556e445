import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildBundle, d1Bytes, type ModeBytes } from "../../scripts/d1-bytes.mjs";

// `npm run d1-bytes` at a size that fits in the test suite: the built Worker under Miniflare on persisted
// storage, 5 runs of every mode after a warm-up run, and the rows each run leaves in the local D1
// database, read black-box through the D1 binding. Rows, not pages: a few runs' rows fit in pages
// already there, or take a new one.
describe("D1 bytes per run (small): what each run mode leaves in D1", () => {
  it("leaves no row for a run without a webhook, and only the delivery log's rows for one with a webhook (none with the log in objects)", async () => {
    const workdir = mkdtempSync(join(tmpdir(), "edge-gateway-d1-bytes-test-"));
    try {
      const bundle = buildBundle(join(workdir, "dist"));
      const result = await d1Bytes({
        bundle,
        runs: 5,
        persistDir: join(workdir, "state"),
      });
      const byMode = new Map(result.modes.map((m) => [m.mode, m]));
      const of = (mode: string): ModeBytes => {
        const measured = byMode.get(mode as ModeBytes["mode"]);
        if (!measured) throw new Error(`mode ${mode} was not measured`);
        return measured;
      };
      /** The tables whose row count changed, with their rows per run. */
      const grown = (mode: string) =>
        Object.fromEntries(Object.entries(of(mode).rowsPerRun).filter(([, n]) => n !== 0));

      for (const mode of result.modes) expect(mode.settled, mode.mode).toBe(true);

      // The runs really were of their mode: answered in time, async runs ended, deliveries received.
      expect(of("wait").handedOver).toBe(0);
      expect(of("wait+webhook").handedOver).toBe(0);
      expect(of("async").statuses).toEqual({ succeeded: 5 });
      expect(of("async+webhook").statuses).toEqual({ succeeded: 5 });
      for (const mode of ["sync+webhook", "wait+webhook", "async+webhook"]) expect(of(mode).deliveriesReceived).toBe(5);

      // No webhook: no row in any table (async runs are kept by their keepers, not in D1's async_runs).
      for (const mode of ["sync", "wait", "async", "websocket"]) {
        expect(grown(mode), mode).toEqual({});
        expect(of(mode).rowBytesPerRun, mode).toBe(0);
      }

      // A webhook: one delivery record and its attempts (the delivery log is still in D1), nothing else.
      for (const mode of ["sync+webhook", "wait+webhook", "async+webhook"]) {
        expect(Object.keys(grown(mode)).sort(), mode).toEqual(["webhook_attempts", "webhook_deliveries"]);
        expect(of(mode).rowsPerRun.webhook_deliveries, mode).toBe(1);
        expect(of(mode).rowsPerRun.webhook_attempts, mode).toBeGreaterThanOrEqual(1);
      }

      // With the delivery log in each project's objects (DELIVERY_LOG_STORE=objects, the move under way):
      // a run with a webhook leaves nothing in D1 either, its delivery received all the same.
      const inObjects = await d1Bytes({
        bundle,
        runs: 5,
        modes: ["sync+webhook", "wait+webhook", "async+webhook"],
        persistDir: join(workdir, "state-objects"),
        deliveryLogStore: "objects",
      });
      for (const mode of inObjects.modes) {
        expect(mode.settled, mode.mode).toBe(true);
        expect(mode.deliveriesReceived, mode.mode).toBe(5);
        expect(Object.fromEntries(Object.entries(mode.rowsPerRun).filter(([, n]) => n !== 0)), mode.mode).toEqual({});
        expect(mode.rowBytesPerRun, mode.mode).toBe(0);
      }
    } finally {
      rmSync(workdir, { recursive: true, force: true });
    }
  }, 240_000);
});
