import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { TEST_SECRETS } from "./test/secrets.ts";

export default defineConfig(async () => {
  const migrations = await readD1Migrations("migrations");
  return {
    test: {
      // CI also writes machine-readable results; .ci/run prints the "N passed, N failed" line from them.
      // Logs (structured lines the code under test writes on purpose) are shown for failing tests only.
      silent: "passed-only" as const,
      reporters: process.env.CI ? ["default", ["json", { outputFile: "artifacts/vitest.json" }] as ["json", object]] : ["default"],
      projects: [
        {
          plugins: [
            cloudflareTest(({ inject }) => ({
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings: {
                  ...TEST_SECRETS,
                  TEST_MIGRATIONS: migrations,
                  // Real local peers (test/global/peers.mjs): app upstreams and webhook receivers.
                  PEER_URL: inject("peerUrl" as never) as string,
                  PEER_DOWN_URL: inject("downUrl" as never) as string,
                  // A real DNS server (test/global/dns-harness.mjs) and fakes of other outside services.
                  DNS_RESOLVER_URL: inject("dohUrl"),
                  TEST_FAKES_URL: inject("fakesUrl"),
                  // A private DNS harness whose zone the tests write (test/global/dns-zones.mjs).
                  TEST_ZONES_DOH_URL: inject("zonesDohUrl"),
                  TEST_ZONES_URL: inject("zonesUrl"),
                },
              },
            })),
          ],
          test: {
            name: "workers",
            include: ["src/**/*.test.ts", "src/**/*.test.tsx", "test/workers/**/*.test.ts"],
            setupFiles: ["test/setup/apply-migrations.ts"],
            globalSetup: ["test/global/peers.mjs", "test/global/dns-harness.mjs", "test/global/fakes.mjs", "test/global/dns-zones.mjs"],
          },
        },
        {
          test: {
            name: "node",
            include: ["test/node/**/*.test.ts"],
            environment: "node",
            testTimeout: 60_000,
          },
        },
      ],
    },
  };
});
