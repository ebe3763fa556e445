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
  it("leaves no row for a run of any mode, with or without a webhook (with the delivery log in D1: only its rows)", async () => {
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

      // No run leaves a row in D1, with or without a webhook: async runs are kept by their keepers, and
      // deliveries recorded in each project's delivery logs (DELIVERY_LOG_STORE's default).
      for (const mode of result.modes) {
        expect(grown(mode.mode), mode.mode).toEqual({});
        expect(mode.rowBytesPerRun, mode.mode).toBe(0);
      }

      // With DELIVERY_LOG_STORE=d1 (the store before the move, kept to roll back to), a run with a webhook
      // leaves its delivery record and attempts in D1, and nothing else.
      const inD1 = await d1Bytes({
        bundle,
        runs: 5,
        modes: ["sync+webhook", "wait+webhook", "async+webhook"],
        persistDir: join(workdir, "state-d1"),
        deliveryLogStore: "d1",
      });
      for (const mode of inD1.modes) {
        expect(mode.settled, mode.mode).toBe(true);
        expect(mode.deliveriesReceived, mode.mode).toBe(5);
        const rows = Object.fromEntries(Object.entries(mode.rowsPerRun).filter(([, n]) => n !== 0));
        expect(Object.keys(rows).sort(), mode.mode).toEqual(["webhook_attempts", "webhook_deliveries"]);
        expect(rows.webhook_deliveries, mode.mode).toBe(1);
        expect(rows.webhook_attempts, mode.mode).toBeGreaterThanOrEqual(1);
      }
    } finally {
      rmSync(workdir, { recursive: true, force: true });
    }
  }, 240_000);
});
