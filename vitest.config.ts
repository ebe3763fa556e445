import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { configDefaults, defineConfig } from "vitest/config";
import type { D1Migration } from "@cloudflare/vitest-plugin";
import { TEST_OIDC, TEST_SECRETS } from "./test/secrets.ts";

export default defineConfig(async () => {
  const migrations = await readD1Migrations("migrations");
  return {
    test: {
      // CI also writes machine-readable results; .ci/run prints the "N passed, N failed" line from them.
      // Logs (structured lines the code under test writes on purpose) are shown for failing tests only.
      silent: "passed-only" as const,
      reporters: process.env.CI
        ? ["default", ["json", { outputFile: "artifacts/vitest.json" }] as ["json", object]]
        : ["default"],
      projects: [
        workers("workers", {}, migrations),
        // The delivery log in D1 (DELIVERY_LOG_STORE=d1: the store before issue 41, kept to roll back to for
        // its records' retention): the delivery path's core, its records, attempts, faults and statements.
        workers(
          "workers (delivery log in D1)",
          {
            include: [
              "src/webhooks/fate.test.ts",
              "src/webhooks/attempt/*.test.ts",
              "src/webhooks/resend.test.ts",
              "src/runs/webhook.test.ts",
              "test/workers/faults.test.ts",
              "test/workers/d1-statements.test.ts",
            ],
            bindings: { DELIVERY_LOG_STORE: "d1" },
          },
          migrations,
        ),
        {
          test: {
            name: "node",
            include: ["test/node/**/*.test.ts"],
            environment: "node",
            globalSetup: ["test/global/oidc.mjs"],
            testTimeout: 60_000,
          },
        },
      ],
    },
  };
});

/** A project of tests inside workerd, with the gateway's bindings (and `options.bindings` over them). */
function workers(
  name: string,
  options: { include?: string[]; exclude?: string[]; bindings?: Record<string, string> },
  migrations: D1Migration[],
) {
  return {
    plugins: [
      cloudflareTest(({ inject }) => ({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          bindings: {
            ...TEST_SECRETS,
            ...options.bindings,
            TEST_MIGRATIONS: migrations,
            // Real local peers (test/global/peers.mjs): app upstreams and webhook receivers.
            PEER_URL: inject("peerUrl" as never) as string,
            PEER_DOWN_URL: inject("downUrl" as never) as string,
            PEER_OTHER_URL: inject("peerOtherUrl" as never) as string,
            // Three more origins of the same receivers (comma-separated): lanes of their own.
            PEER_MORE_URLS: inject("peerMoreUrls" as never) as string,
            // An OpenAI-compatible server (test/global/openai-peer.mjs), deployed as a custom app.
            OPENAI_PEER_URL: inject("openaiPeerUrl"),
            // Test-only: webhook attempts time out after 2 s instead of 10 s, so the lanes tests'
            // receivers that time out (src/webhooks/lanes.test.ts) hold their lanes for 10 s, not 38 s.
            // Every other test that needs a timeout sets its own.
            WEBHOOK_TIMEOUT_MS: "2000",
            // Test-only: a keeper's alarm does not sweep its runs. The alarm keeps the real clock, and
            // the tests' runs are stamped by a fake one a week behind it, so every run would look
            // stale to it; tests sweep a keeper with their own clock (test/async-runs.ts `sweepKept`).
            OBJECT_SWEEPS: "manual",
            // Run records leave their isolate at once rather than after a second, so a test's next
            // request (its client waits for the request's waitUntil) reads them in the ledger.
            USAGE_FLUSH_MS: "0",
            // A real DNS server (test/global/dns-harness.mjs) and fakes of other outside services.
            DNS_RESOLVER_URL: inject("dohUrl"),
            TEST_FAKES_URL: inject("fakesUrl"),
            // A real OpenID provider (test/global/oidc.mjs), and another issuer for tokens to refuse.
            OIDC_ISSUER: inject("oidcIssuer"),
            OIDC_CLIENT_ID: TEST_OIDC.clientId,
            OIDC_CLIENT_SECRET: TEST_OIDC.clientSecret,
            TEST_OIDC_OTHER_ISSUER: inject("oidcOtherIssuer"),
            // A private DNS harness whose zone the tests write (test/global/dns-zones.mjs).
            TEST_ZONES_DOH_URL: inject("zonesDohUrl"),
            TEST_ZONES_URL: inject("zonesUrl"),
          },
        },
      })),
    ],
    test: {
      name,
      include: options.include ?? ["src/**/*.test.ts", "src/**/*.test.tsx", "test/workers/**/*.test.ts"],
      exclude: [...configDefaults.exclude, ...(options.exclude ?? [])],
      setupFiles: ["test/setup/apply-migrations.ts"],
      globalSetup: [
        "test/global/peers.mjs",
        "test/global/dns-harness.mjs",
        "test/global/fakes.mjs",
        "test/global/dns-zones.mjs",
        "test/global/oidc.mjs",
        "test/global/openai-peer.mjs",
      ],
    },
  };
}
