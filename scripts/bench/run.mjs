// `npm run bench [-- --seconds=5 --reps=3]`: the gateway's cost against the runtime's own limit,
// every figure a ratio to a baseline measured in the same run (these machines are noisy).
// Servers (workerd, the Node peers) run pinned to CPU 0 and wrk to CPU 1 when taskset exists.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { buildBundle, seedRunnableApp, startGateway, startPassthrough } from "./gateway.mjs";
import { startPeer } from "./peers.mjs";
import { ensureWrk, wrk } from "./wrk.mjs";

const options = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=")));
const SECONDS = Number(options.seconds ?? 5);
const REPS = Number(options.reps ?? 3);

const hasTaskset = spawnSync("taskset", ["-c", "0", "true"]).status === 0;
if (hasTaskset && !process.env.BENCH_PINNED) {
  // Re-run pinned to CPU 0: workerd and the peers inherit it; wrk gets CPU 1.
  const child = spawnSync("taskset", ["-c", "0", process.execPath, ...process.argv.slice(1)], {
    stdio: "inherit",
    env: { ...process.env, BENCH_PINNED: "1" },
  });
  process.exit(child.status ?? 1);
}
const WRK_CPU = hasTaskset ? 1 : undefined;

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const fmt = (n, digits = 2) => n.toFixed(digits);
const log = (...args) => console.error("bench:", ...args);

ensureWrk();
const workdir = mkdtempSync(join(tmpdir(), "edge-gateway-bench-"));
const cleanup = [];
try {
  log("building the Worker bundle");
  const bundle = buildBundle(join(workdir, "dist"));
  const bundleBytes = readFileSync(bundle);

  const upstream = await startPeer();
  const receiver = await startPeer();
  cleanup.push(upstream.close, receiver.close);
  const bare = await startPassthrough(upstream.url);
  cleanup.push(() => bare.mf.dispose());
  const gateway = await startGateway(bundle);
  cleanup.push(() => gateway.mf.dispose());
  const seed = await seedRunnableApp(gateway.url, upstream.url);

  const auth = { Authorization: `Bearer ${seed.token}` };

  const targets = [
    { id: "a", name: "upstream directly", url: `${upstream.url}${seed.runPath}` },
    { id: "b", name: "bare pass-through Worker", url: `${bare.url}${seed.runPath}` },
    { id: "c", name: "gateway, default hostname", url: `${gateway.url}${seed.runPath}`, headers: auth },
    {
      id: "e",
      name: "gateway, with webhookEndpoint",
      url: `${gateway.url}${seed.runPath}?webhookEndpoint=${encodeURIComponent(`${receiver.url}/hook`)}`,
      headers: auth,
    },
  ];
  if (options.targets) targets.splice(0, targets.length, ...targets.filter((t) => options.targets.includes(t.id)));
  for (const target of targets) {
    const check = await fetch(target.url, { headers: target.headers });
    if (!check.ok) throw new Error(`${target.name}: ${check.status} ${await check.text()}`);
  }

  const results = Object.fromEntries(targets.map((t) => [t.id, { rps: [], p50: [], p99: [], bad: 0 }]));
  for (let rep = 1; rep <= REPS; rep++) {
    for (const target of targets) {
      log(`rep ${rep}/${REPS}: ${target.id}) ${target.name}`);
      const load = await wrk({ ...target, connections: 16, seconds: SECONDS, cpu: WRK_CPU });
      const single = await wrk({ ...target, connections: 1, seconds: SECONDS, cpu: WRK_CPU });
      const r = results[target.id];
      r.rps.push(load.rps);
      r.p50.push(single.p50);
      r.p99.push(single.p99);
      r.bad += load.non2xx + single.non2xx;
    }
  }

  const base = { rps: median(results.b.rps), p50: median(results.b.p50) };
  console.log(`\n## Run path (wrk: 16 connections for req/s, 1 connection for p50/p99; ${SECONDS} s each, median of ${REPS} interleaved reps)\n`);
  console.log("| target | req/s | ×(b) | p50 ms | p99 ms | p50 − (b) ms | non-2xx |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const target of targets) {
    const r = results[target.id];
    const rps = median(r.rps);
    const p50 = median(r.p50);
    console.log(
      `| (${target.id}) ${target.name} | ${fmt(rps, 0)} | ${fmt(rps / base.rps)} | ${fmt(p50, 3)} | ${fmt(median(r.p99), 3)} | ${fmt(p50 - base.p50, 3)} | ${r.bad} |`,
    );
  }

  console.log("\n## Bundle\n");
  console.log(`| figure | value |`);
  console.log(`|---|---:|`);
  console.log(`| size (raw) | ${fmt(bundleBytes.length / 1024, 1)} KiB |`);
  console.log(`| size (gzip) | ${fmt(gzipSync(bundleBytes, { level: 9 }).length / 1024, 1)} KiB |`);
  console.log(`| Miniflare start, gateway ÷ bare Worker | ${fmt(gateway.startupMs / bare.startupMs)} (${fmt(gateway.startupMs, 0)} ms vs ${fmt(bare.startupMs, 0)} ms, workerd boot included) |`);
  console.log(`\nmachine: ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}), ${new Date().toISOString()}, pinned: ${hasTaskset}`);
} finally {
  for (const close of cleanup.reverse()) await close();
  rmSync(workdir, { recursive: true, force: true });
}
