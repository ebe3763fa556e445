// Where an async run with a webhook spends its CPU, against a synchronous run with one: the built
// gateway under Miniflare with the inspector on, bursts of runs made 32 at a time (each drained: every
// delivery received) while V8's sampling profiler runs, then self time by function and SQLite's `exec`
// by its callers (the gateway's Durable Objects run in its isolate).
//   node scripts/bench/profile-async.mjs [async|sync] [--runs=600]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pool } from "./async.mjs";
import { buildBundle, seedRunnableApp, startGateway } from "./gateway.mjs";
import { startPeer } from "./peers.mjs";
import { printProfile, profileWhile } from "./profile.mjs";

const args = process.argv.slice(2);
const MODE = args.find((a) => !a.startsWith("--")) ?? "async";
const options = Object.fromEntries(args.filter((a) => a.startsWith("--")).map((a) => a.slice(2).split("=")));
const RUNS = Number(options.runs ?? 600);
if (MODE !== "async" && MODE !== "sync") throw new Error("profile-async: the mode is async or sync");

const upstream = await startPeer();
const receiver = await startPeer({ status: 204 });
const dir = mkdtempSync(join(tmpdir(), "profile-async-"));
const port = 9300 + Math.floor(Math.random() * 500);
const gw = await startGateway(buildBundle(join(dir, "dist")), {
  sharedOptions: { inspectorPort: port, handleStructuredLogs: () => undefined },
});
try {
  const seed = await seedRunnableApp(gw.url, upstream.url);
  const hook = `webhookEndpoint=${encodeURIComponent(`${receiver.url}/hook`)}`;
  const url = `${gw.url}${seed.runPath}?${MODE === "async" ? "async=true&" : ""}${hook}`;
  const headers = { Authorization: `Bearer ${seed.token}`, "Content-Type": "application/json" };
  /** `n` runs, 32 at a time, until every delivery is received. */
  const burst = async (n) => {
    const before = receiver.count;
    await pool(n, 32, async () => (await fetch(url, { method: "POST", headers, body: "{}" })).arrayBuffer());
    await receiver.waitFor(before + n);
  };
  await burst(64);
  const { profile } = await profileWhile(port, () => burst(RUNS));
  printProfile(profile, { units: RUNS, label: `${MODE}, ${RUNS} runs with webhooks`, execCallers: true });
} finally {
  await gw.mf.dispose();
  await upstream.close();
  await receiver.close();
  rmSync(dir, { recursive: true, force: true });
}
