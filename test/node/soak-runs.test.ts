import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildBundle, soakRuns } from "../../scripts/soak/runs.mjs";

// The runs soak of `npm run soak` at a size that fits in the test suite: the built Worker under
// Miniflare, runs of every mode with callers that hang up and deadlines shorter than the app, and the
// local runtime restarted halfway on its persisted storage. The app counts its calls per run id.
describe("runs soak (small): every app called once, nothing lost, across a restart", () => {
  it("calls no app twice, loses no result and ends every run it took on", async () => {
    const workdir = mkdtempSync(join(tmpdir(), "edge-gateway-soak-runs-test-"));
    try {
      const result = await soakRuns({
        bundle: buildBundle(join(workdir, "dist")),
        runs: 150,
        concurrency: 16,
        persistDir: join(workdir, "state"),
        settleTimeoutMs: 120_000,
      });
      expect(result.violations).toEqual([]);
      expect(result.app.calledTwice).toBe(0);
      expect(result.app.indexCalledTwice).toBe(0);
      expect(result.lost).toBe(0);
      expect(result.stored.notFinal).toBe(0);
      // The mix really happened: every mode, hang-ups, a restart that cut calls under way.
      expect(result.byMode.sync).toBeGreaterThan(0);
      expect(result.byMode.wait).toBeGreaterThan(0);
      expect(result.byMode.async).toBeGreaterThan(0);
      expect(result.callers.hungUp).toBeGreaterThan(0);
      expect(result.restart?.atRun).toBe(75);
      expect(result.app.runIds).toBeGreaterThan(140);
    } finally {
      rmSync(workdir, { recursive: true, force: true });
    }
  }, 240_000);
});
