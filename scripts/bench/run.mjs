// `npm run bench [-- --seconds=5 --reps=3 --domains=1000 --deliveries=1000 [--async=<deliveries>] --targets=abcdef
// --stream-mib=100 [--stream-samples=<100 × seconds>] [--sections=runpath,delivery,fairness,units,domains,async,streaming,usage,runcost,bundle]]`: the
// gateway's cost against the runtime's own limit, every figure a ratio to a baseline measured in the
// same run (these machines are noisy). Servers (workerd, the Node peers) run pinned to CPU 0 and wrk
// to CPU 1 when taskset exists. Loopback only; bounded by the options.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { benchAsync, printAsync } from "./async.mjs";
import { benchFairness, printFairness } from "./fairness.mjs";
import {
  buildBundle,
  managementApi,
  SECRETS,
  seedRunnableApp,
  startFloor,
  startGateway,
  startPassthrough,
} from "./gateway.mjs";
import { startCountingProxy, startPeer } from "./peers.mjs";
import { benchRunPath, printRunPath } from "./runpath.mjs";
import { benchStreaming, printStreaming, startStreamPeer } from "./streaming.mjs";
import { measureUnits } from "./units.mjs";
import { cpuReader } from "./cpu.mjs";
import { benchUsage, printUsage } from "./usage.mjs";
import { ensureWrk, wrk } from "./wrk.mjs";

const options = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=")));
const SECONDS = Number(options.seconds ?? 3);
const REPS = Number(options.reps ?? 5);
const DOMAINS = Number(options.domains ?? 1000);
const DELIVERIES = Number(options.deliveries ?? 1000);
const TARGETS = options.targets ?? "abcdef";
// Which sections run (all by default): a short run of one section leaves the rest of the machine alone.
const SECTIONS = new Set(
  (options.sections ?? "runpath,delivery,fairness,units,domains,async,streaming,usage,runcost,bundle").split(","),
);
const section = (name) => SECTIONS.has(name);
// As many async runs as deliveries (1,000 by default; the CI smoke passes fewer deliveries).
const ASYNC_RUNS = Number(options.async ?? DELIVERIES);
// The large body of the streaming section, and how many event streams time their first byte.
const STREAM_MIB = Number(options["stream-mib"] ?? 100);
const STREAM_SAMPLES = Number(options["stream-samples"] ?? 100 * SECONDS);
// Usage recording (section 7): `--usage=0` skips it.
const USAGE = options.usage !== "0";

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
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `work(i)` for i < n with at most `limit` at once. */
async function pool(n, limit, work) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, n) }, async () => {
      while (next < n) await work(next++);
    }),
  );
}

const DRAIN_QUIET_MS = 1500;

/** Waits until `peer.count` has not moved for `quietMs` (deliveries left by a load test have drained). */
async function drained(peer, quietMs = 1500, maxMs = 120_000) {
  const deadline = Date.now() + maxMs;
  let last = -1;
  while (Date.now() < deadline) {
    if (peer.count === last) return;
    last = peer.count;
    await sleep(quietMs);
  }
}

/** Active CPU of the Worker's startup as `wrangler check startup` profiles it locally ("97.9 ms"), or null. */
function startupCpu(outfile) {
  try {
    const out = execFileSync("npx", ["wrangler", "check", "startup", "--outfile", outfile, "--env", ""], {
      stdio: ["ignore", "pipe", "ignore"],
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
    }).toString();
    return /Active: ([\d.]+ ms)/.exec(out)?.[1] ?? null;
  } catch {
    return null;
  }
}

/** The DNS test harness (knot behind dnsdist), started by its own idempotent script; null if it cannot start. */
function dnsHarness() {
  try {
    return execFileSync("bash", ["scripts/dns-harness/start.sh"], { stdio: ["ignore", "pipe", "ignore"] })
      .toString()
      .trim();
  } catch {
    log("the DNS harness (scripts/dns-harness) did not start: custom-domain figures are skipped");
    return null;
  }
}

ensureWrk();
const workdir = mkdtempSync(join(tmpdir(), "edge-gateway-bench-"));
const cleanup = [];
try {
  log("building the Worker bundle");
  // BENCH_BUNDLE: a bundle built (or changed) beforehand, to measure what one piece of it costs (A/B).
  const bundle = process.env.BENCH_BUNDLE ?? buildBundle(join(workdir, "dist"));
  const bundleBytes = readFileSync(bundle);
  const startup = section("bundle") ? startupCpu(join(workdir, "startup.cpuprofile")) : null;

  const dohUrl = section("domains") ? dnsHarness() : null;
  const upstream = await startPeer();
  const receiver = await startPeer({ status: 204 });
  const slowReceiver = await startPeer({ delayMs: 200, status: 204 });
  // The floor's deliveries go to a receiver of their own, so each target's drain is its own.
  const floorReceiver = await startPeer({ status: 204 });
  const doh = dohUrl ? await startCountingProxy(dohUrl) : null;
  cleanup.push(upstream.close, receiver.close, slowReceiver.close, floorReceiver.close);
  if (doh) cleanup.push(doh.close);
  const bare = await startPassthrough(upstream.url);
  cleanup.push(() => bare.mf.dispose());
  const floor = await startFloor(upstream.url, `${floorReceiver.url}/hook`);
  cleanup.push(() => floor.mf.dispose());
  // Section 3 puts DOMAINS domains in the one bench project: above the per-project cap's default.
  const extraBindings = { MAX_DOMAINS_PER_PROJECT: String(Math.min(10_000, DOMAINS + 10)) };
  const gateway = await startGateway(bundle, doh ? { dnsResolverUrl: doh.url, extraBindings } : { extraBindings });
  cleanup.push(() => gateway.mf.dispose());
  const seed = await seedRunnableApp(gateway.url, upstream.url);
  const auth = { Authorization: `Bearer ${seed.token}` };
  const api = managementApi(gateway.url);

  let customHost = null;
  if (doh) {
    // good.example.test is CNAMEd to proxy.aws.us-east-1.service.test in the harness's zone.
    customHost = "good.example.test";
    await api(seed.token, "POST", `/projects/${seed.projectId}/domains`, { domain: customHost, region: "us-east-1" });
    const validated = await api(seed.token, "POST", `/projects/${seed.projectId}/domains/${customHost}/validate`);
    if (validated.status !== "validated") throw new Error(`custom domain: ${JSON.stringify(validated)}`);
  }

  const hook = (peer) => `?webhookEndpoint=${encodeURIComponent(`${peer.url}/hook`)}`;
  const targets = [
    { id: "a", name: "upstream directly", url: `${upstream.url}${seed.runPath}` },
    { id: "b", name: "bare pass-through Worker", url: `${bare.url}${seed.runPath}` },
    { id: "c", name: "gateway, default hostname", url: `${gateway.url}${seed.runPath}`, headers: auth },
    customHost && {
      id: "d",
      name: `gateway, custom domain (${customHost})`,
      url: `${gateway.url}${seed.runPath}`,
      headers: { ...auth, Host: customHost },
    },
    {
      id: "e",
      name: "gateway, with webhookEndpoint",
      url: `${gateway.url}${seed.runPath}${hook(receiver)}`,
      headers: auth,
      drains: receiver,
    },
    {
      id: "f",
      name: "floor of (e): (b) + 1 D1 write before the upstream + 1 queue send after; its consumer signs, POSTs, records in 1 D1 write",
      url: `${floor.url}${seed.runPath}`,
      drains: floorReceiver,
    },
  ].filter((t) => t && TARGETS.includes(t.id) && section("runpath"));
  for (const target of targets) {
    const check = await fetch(target.url, { headers: target.headers });
    if (!check.ok) throw new Error(`${target.name}: ${check.status} ${await check.text()}`);
    // The workerd serving it (not the upstream, which runs in this process).
    target.cpu = target.id === "a" ? null : cpuReader(target.url);
  }

  // 2. Webhook delivery: one delivery to a 200 ms receiver, then 100 at once, then many to a fast one.
  const run = (peer) =>
    fetch(`${gateway.url}${seed.runPath}${hook(peer)}`, { headers: auth }).then((r) => r.arrayBuffer());
  let deliveryFigures = null;
  if (section("delivery")) {
    log("webhook delivery");
    const single = [];
    for (let i = 0; i < 3; i++) {
      const before = slowReceiver.count;
      const started = performance.now();
      await run(slowReceiver);
      await slowReceiver.waitFor(before + 1);
      single.push(performance.now() - started);
    }
    let before = slowReceiver.count;
    let started = performance.now();
    await Promise.all(Array.from({ length: 100 }, () => run(slowReceiver)));
    await slowReceiver.waitFor(before + 100);
    const batchMs = performance.now() - started;
    before = receiver.count;
    started = performance.now();
    await pool(DELIVERIES, 32, () => run(receiver));
    const producedMs = performance.now() - started;
    await receiver.waitFor(before + DELIVERIES);
    const fastMs = performance.now() - started;
    deliveryFigures = { single, batchMs, producedMs, fastMs };
  }

  // Fairness, on the real local queue broker (one batch at a time, wrangler.toml's batch size), in a
  // gateway of its own whose attempts time out after 2 s (as in the tests), so its slow lanes drain in
  // seconds and are gone before the run path is measured. Each run made as a user makes it.
  let fairness = null;
  if (section("fairness")) {
    log(
      "fairness: a lane full of receivers that hold each connection for the whole timeout, beside fast ones and a 404",
    );
    fairness = await benchFairness(bundle, upstream.url);
  }

  const units = section("units")
    ? (log("unit costs of the local bindings"), await measureUnits({ receiverUrl: `${receiver.url}/hook`, cpuReader }))
    : null;

  // 3. Domain validation: DOMAINS pending domains, due now, checked by one cron run and its fan-out.
  let domainFigures = null;
  if (doh) {
    log(`domain validation: creating ${DOMAINS} domains`);
    const tag = Date.now().toString(36);
    await pool(DOMAINS, 16, (i) =>
      api(seed.token, "POST", `/projects/${seed.projectId}/domains`, {
        domain: `d${i}-${tag}.wild.example.test`,
        region: "us-east-1",
      }),
    );
    await gateway.db.prepare("UPDATE domains SET next_check_at = 0 WHERE status = 'pending'").run();
    const queriesBefore = doh.count;
    const worker = await gateway.mf.getWorker();
    const started = performance.now();
    await worker.scheduled({ cron: "*/30 * * * *" });
    let validated = 0;
    const deadline = Date.now() + 300_000;
    while (Date.now() < deadline) {
      const row = await gateway.db
        .prepare("SELECT count(*) AS n FROM domains WHERE status = 'validated' AND hostname LIKE ?")
        .bind(`%-${tag}.wild.example.test`)
        .first();
      validated = row.n;
      if (validated >= DOMAINS) break;
      await sleep(200);
    }
    // The design's own numbers, read from the source so the table cannot drift from it.
    const source = ["cron", "rules", "caa"].map((file) => readFileSync(`src/domains/${file}.ts`, "utf8")).join("\n");
    const constant = (name) => Number(new RegExp(`${name} = ([\\d_]+)`).exec(source)?.[1].replace(/_/g, ""));
    domainFigures = {
      validated,
      ms: performance.now() - started,
      queries: doh.count - queriesBefore,
      limit: constant("SUBREQUEST_LIMIT"),
      // `SUBREQUESTS_PER_CHECK = MAX_QUERIES_PER_CHECK + 5`: a sum of constants and numbers.
      perCheck: /SUBREQUESTS_PER_CHECK = ([^;]+);/
        .exec(source)[1]
        .split("+")
        .reduce((sum, term) => sum + (/^\s*\d+\s*$/.test(term) ? Number(term) : constant(term.trim())), 0),
      perBatch: constant("CHECKS_PER_QUEUE_BATCH"),
      inline: constant("INLINE_CHECKS_PER_CRON"),
    };
  }

  // 1. Run path, interleaved repetitions.
  const results = Object.fromEntries(
    targets.map((t) => [t.id, { rps: [], drainedRps: [], p50: [], p99: [], cpu: [], bad: 0 }]),
  );
  for (let rep = 1; rep <= REPS; rep++) {
    for (const target of targets) {
      log(`rep ${rep}/${REPS}: ${target.id}) ${target.name}`);
      const cpuBefore = target.cpu?.();
      const load = await wrk({ ...target, connections: 16, seconds: SECONDS, cpu: WRK_CPU });
      // A run's deliveries are part of its cost: counted until they have drained.
      const loadEnded = performance.now();
      if (target.drains) await drained(target.drains, DRAIN_QUIET_MS);
      // Throughput with the drain: runs made ÷ (load + the time their deliveries took to arrive after it).
      // The last delivery's arrival, as the receiver saw it (the quiet period only tells that it was the last).
      const lastArrival = target.drains?.arrivals.at(-1) ?? loadEnded;
      const drainMs = target.drains ? Math.max(0, lastArrival - loadEnded) : 0;
      if (target.drains) log(`   its deliveries arrived until ${fmt(drainMs, 0)} ms after the load`);
      results[target.id].drainedRps.push((load.rps * SECONDS) / (SECONDS + drainMs / 1000));
      if (target.cpu) results[target.id].cpu.push((target.cpu() - cpuBefore) / (load.rps * SECONDS));
      const one = await wrk({ ...target, connections: 1, seconds: SECONDS, cpu: WRK_CPU });
      if (target.drains) await drained(target.drains);
      const r = results[target.id];
      log(
        `   ${load.rps} req/s at 16, p50 ${one.p50} ms at 1${r.cpu.length ? `, ${fmt(r.cpu.at(-1), 3)} ms CPU/req` : ""}`,
      );
      r.rps.push(load.rps);
      r.p50.push(one.p50);
      r.p99.push(one.p99);
      r.bad += load.non2xx + one.non2xx;
    }
  }

  // 6. Streaming: a custom app on its own peer, through the gateway and through a bare Worker of its own.
  let streamFigures = null;
  if (STREAM_MIB > 0 && section("streaming")) {
    const streamPeer = await startStreamPeer();
    cleanup.push(streamPeer.close);
    const streamBare = await startPassthrough(streamPeer.url);
    cleanup.push(() => streamBare.mf.dispose());
    const app = `/projects/${seed.projectId}/apps`;
    const { app_id } = await api(seed.token, "POST", app, {
      name: "stream-app",
      region: "us-east-1",
      runtime: "custom",
    });
    const { build_id } = await api(seed.token, "POST", `${app}/${app_id}/builds`);
    await api(seed.token, "PATCH", `${app}/${app_id}/builds/${build_id}`, { status: "building" });
    await api(seed.token, "PATCH", `${app}/${app_id}/builds/${build_id}`, {
      status: "succeeded",
      origin_url: streamPeer.url,
    });
    const appPath = `/v4/${seed.projectId}/stream-app`;
    streamFigures = await benchStreaming({
      gateway: { url: `${gateway.url}${appPath}`, headers: auth },
      bare: { url: `${streamBare.url}${appPath}`, headers: {} },
      samples: STREAM_SAMPLES,
      mib: STREAM_MIB,
      reps: REPS,
      seconds: SECONDS,
      wrk,
      wrkCpu: WRK_CPU,
      log,
    });
  }

  // 5. Async runs with webhooks, drained, beside synchronous runs with webhooks.
  let asyncFigures = null;
  if (ASYNC_RUNS > 0 && section("async")) {
    log(`async runs: ${ASYNC_RUNS} with webhooks, and as many synchronous ones`);
    asyncFigures = await benchAsync({ gateway, seed, receiver, count: ASYNC_RUNS, cpu: cpuReader(gateway.url) });
  }

  // 7. Usage recording: the run path with recording on and off, and the usage queries over a busy week.
  // 8. The run path's table against the bare Worker (req/s, CPU, p99, binary, 100 MiB, first byte) and
  // each remaining cost measured alone (scripts/bench/runpath.mjs).
  const runCost = section("runcost")
    ? (log("run path: its table and each cost alone"),
      await benchRunPath({
        bundle,
        seconds: SECONDS,
        reps: REPS,
        mib: STREAM_MIB,
        samples: STREAM_SAMPLES,
        wrkCpu: WRK_CPU,
        log,
      }))
    : null;
  const usageFigures =
    USAGE && section("usage")
      ? await benchUsage({ bundle, upstreamUrl: upstream.url, seconds: SECONDS, reps: REPS, wrkCpu: WRK_CPU, log })
      : null;

  if (targets.length)
    console.log(
      `\n## 1. Run path (wrk: 16 connections for req/s and CPU, 1 for p50/p99; ${SECONDS} s each; medians of ${REPS} interleaved reps)\n`,
    );
  // Each ratio and difference is taken within a repetition (the targets of one rep ran seconds apart)
  // and the median of those is reported: the machine's drift between reps cancels out.
  const b = results.b;
  const paired = (r, key, op) =>
    b && r[key].length === b[key].length && b[key].length ? median(r[key].map((v, i) => op(v, b[key][i]))) : null;
  const show = (value, digits) => (value === null ? "–" : fmt(value, digits));
  if (targets.length)
    console.log(
      "| target | req/s | ×(b) | p50 ms | p99 ms | p50 − (b) ms | workerd CPU ms/req | CPU − (b) ms | non-2xx |",
    );
  if (targets.length) console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const target of targets) {
    const r = results[target.id];
    const ratio = paired(r, "rps", (x, y) => x / y);
    const extra = paired(r, "p50", (x, y) => x - y);
    const cpuExtra = paired(r, "cpu", (x, y) => x - y);
    const cpu = r.cpu.length ? median(r.cpu) : null;
    console.log(
      `| (${target.id}) ${target.name} | ${fmt(median(r.rps), 0)} | ${show(ratio, 2)} | ${fmt(median(r.p50), 3)} | ${fmt(median(r.p99), 3)} | ${show(extra, 3)} | ${show(cpu, 3)} | ${show(cpuExtra, 3)} | ${r.bad} |`,
    );
  }

  if (results.e?.rps.length && results.f?.rps.length === results.e.rps.length) {
    // Both targets deliver what they run: throughput counts the load and its drain, CPU counts the delivery.
    const pairedEF = (key, op) => median(results.e[key].map((v, i) => op(v, results.f[key][i])));
    const drainedShare = pairedEF("drainedRps", (e, f) => e / f);
    const cpuShare = pairedEF("cpu", (e, f) => f / e);
    const share = pairedEF("rps", (e, f) => e / f);
    console.log(
      `\n(e) ÷ (f), drained throughput: **${fmt(drainedShare, 2)}** (target ≥ 0.90) — runs ÷ (the load's ${SECONDS} s + the time their deliveries took to arrive after it), each target with its own receiver, paired per rep.`,
    );
    console.log(
      `\n(e) ÷ (f), by CPU per run (the floor's CPU ÷ the gateway's, deliveries included): **${fmt(cpuShare, 2)}** (target ≥ 0.90) — (e) ${fmt(median(results.e.cpu), 3)} ms, (f) ${fmt(median(results.f.cpu), 3)} ms, (e) − (f) ${fmt(
        pairedEF("cpu", (e, f) => e - f),
        3,
      )} ms; (c) − (b), the gateway's own run path: ${results.c && results.b ? fmt(median(results.c.cpu.map((v, i) => v - results.b.cpu[i])), 3) : "–"} ms.`,
    );
    console.log(`\n(e) ÷ (f), req/s during the load: ${fmt(share, 2)}.`);
  }

  if (deliveryFigures || fairness)
    console.log("\n## 2. Webhook delivery (queue consumer in workerd, receivers on loopback)\n");
  if (deliveryFigures) {
    const { single, batchMs, producedMs, fastMs } = deliveryFigures;
    const one = median(single);
    console.log("| figure | value |");
    console.log("|---|---:|");
    console.log(`| one delivery to a 200 ms receiver, run → received (median of 3) | ${fmt(one, 0)} ms |`);
    console.log(
      `| 100 deliveries to the same receiver, first run → last received | ${fmt(batchMs, 0)} ms (**${fmt(batchMs / one)}×** one) |`,
    );
    console.log(
      `| ${DELIVERIES} deliveries to a fast receiver (runs made 32 at a time) | ${fmt(DELIVERIES / (fastMs / 1000), 0)} deliveries/s (runs made in ${fmt(producedMs, 0)} ms, all received after ${fmt(fastMs, 0)} ms) |`,
    );
  }
  if (fairness) printFairness(fairness, fmt);

  if (units) {
    const us = (v) => `${fmt(v, 0)} µs`;
    const perDelivery = units.pending + (units.claims3 + units.outcomes3) / 3;
    console.log(
      "\n### Unit costs of the local bindings (workerd CPU per call, in a Worker's loop, on the real schema)\n",
    );
    console.log("| call | CPU |");
    console.log("|---|---:|");
    console.log(`| D1: a delivery's pending row (INSERT), its own round trip | ${us(units.pending)} |`);
    console.log(`| D1: one claim (upsert), its own round trip | ${us(units.claim)} |`);
    console.log(
      `| D1: three claims in one \`batch\` (group commit) | ${us(units.claims3)} (each further claim ${us((units.claims3 - units.claim) / 2)}) |`,
    );
    console.log(`| D1: three outcomes (INSERT + trigger) in one \`batch\` | ${us(units.outcomes3)} |`);
    console.log(
      `| D1 per first-attempt delivery, batches of 3: pending + (claims + outcomes) ÷ 3 | **${us(perDelivery)}** (≈ ${fmt(1e6 / perDelivery, 0)} deliveries/s if all of it were the database's time) |`,
    );
    console.log(`| Queues: one \`send\` | ${us(units.send)} |`);
    console.log(`| fetch: one POST to a loopback receiver | ${us(units.post)} |`);
    console.log(
      `| Durable Object: a lane's \`accept\` of a batch of 10 (RPC + 10 SQLite inserts), per delivery | ${us(units.accept10)} |`,
    );
    console.log(
      `| Durable Object: the lane's delete of a settled delivery (RPC per 10), per delivery | ${us(units.settle10)} |`,
    );
    console.log(`| one log line (\`console.log\` of a request line) | ${us(units.log)} |`);
  }

  if (domainFigures) {
    const d = domainFigures;
    console.log(
      `\n## 3. Domain validation (${DOMAINS} pending domains, real DNS: knot behind dnsdist, through a counting DoH proxy)\n`,
    );
    console.log("| figure | value |");
    console.log("|---|---:|");
    console.log(
      `| validated by one cron run and its queue fan-out | ${d.validated} of ${DOMAINS} in ${fmt(d.ms / 1000, 1)} s = **${fmt(d.validated / (d.ms / 1000), 1)} domains/s** |`,
    );
    console.log(`| DoH queries | ${d.queries} (${fmt(d.queries / Math.max(1, d.validated), 2)} per domain) |`);
    console.log(
      `| subrequests per invocation, bound by design (src/domains/cron.ts) | ≤ ${d.perCheck} per check × ${d.perBatch} checks per queue batch (${d.inline} inline in the cron run); limit ${d.limit} |`,
    );
  }

  console.log("\n## 4. Bundle\n");
  console.log("| figure | value |");
  console.log("|---|---:|");
  console.log(`| size (raw) | ${fmt(bundleBytes.length / 1024, 1)} KiB |`);
  console.log(
    `| size (gzip) | ${fmt(gzipSync(bundleBytes, { level: 9 }).length / 1024, 1)} KiB (Workers limit 3 MiB Free, 10 MiB Paid) |`,
  );
  console.log(
    `| startup (module evaluation) CPU, \`wrangler check startup\` profile | ${startup ?? "–"} (Workers limit: 1 s) |`,
  );
  console.log(
    `| Miniflare start, gateway ÷ bare Worker (workerd boot included) | ${fmt(gateway.startupMs / bare.startupMs)} (${fmt(gateway.startupMs, 0)} ms vs ${fmt(bare.startupMs, 0)} ms) |`,
  );
  if (asyncFigures) printAsync(asyncFigures, fmt);
  if (streamFigures) printStreaming(streamFigures, fmt);
  if (runCost) printRunPath(runCost);
  if (usageFigures) printUsage(usageFigures, fmt);
  console.log(
    `\nmachine: ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}), ${new Date().toISOString()}, servers on CPU 0 and wrk on CPU 1: ${hasTaskset}; SECRETS are bench-only (${Object.keys(SECRETS).length}).`,
  );
} finally {
  for (const close of cleanup.reverse()) await close();
  rmSync(workdir, { recursive: true, force: true });
}
