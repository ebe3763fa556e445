import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildBundle, soak, startSoakGateway } from "../../scripts/soak/soak.mjs";

// The soak of `npm run soak` at a size that fits in the test suite: the built Worker under Miniflare,
// runs with webhooks to a receiver that flaps between 200, 404, 500, 302, timeouts and garbage, and
// to a port that refuses connections. Nothing may be lost, nothing may go past 3 attempts.
describe("soak (small): nothing lost under load with faults", () => {
  it("ends every run in exactly one delivery record with the attempts the outcome table says", async () => {
    const workdir = mkdtempSync(join(tmpdir(), "edge-gateway-soak-test-"));
    const gateway = await startSoakGateway(buildBundle(join(workdir, "dist")));
    try {
      const result = await soak({ gateway, runs: 200, concurrency: 16, settleTimeoutMs: 100_000 });
      expect(result.violations).toEqual([]);
      expect(result.records).toBe(200);
      expect(result.callerStatuses).toEqual({ 200: 200 });
      expect(result.tally.pending).toBe(0);
      // The mix really exercised every path: first-try successes, retries, and final failures.
      expect(result.tally.delivered).toBeGreaterThan(0);
      expect(result.tally.failed).toBeGreaterThan(0);
      expect(result.attemptsHistogram[3]).toBeGreaterThan(0);
      // The spec's gap between attempts, from the attempts' records (a gap over it is also a violation).
      expect(result.longestGapMs).toBeLessThanOrEqual(5_000);
    } finally {
      await gateway.mf.dispose();
      rmSync(workdir, { recursive: true, force: true });
    }
  }, 180_000);
});
