// `npm run bench [-- --seconds=3 --reps=5 --domains=1000 --deliveries=1000 [--async=<runs per rep>] [--async-side-batch=10]
// [--delivery-log=d1|objects]
// --targets=abABcdef --stream-mib=100 [--stream-samples=<per rep>] [--sections=runpath,delivery,latency,
// fairness,units,domains,async,usage,runcost,bundle,<registered>]]`: the gateway's cost against the
// runtime's own limit, every figure a ratio to a baseline measured in the same run (these machines are
// noisy), each printed with its spread over repetitions, judged met / missed / undecided against its
// target (scripts/bench/report.mjs), and each section with the CPU other processes took while it ran
// (scripts/bench/noise.mjs). Sections of other parts of the gateway register in
// scripts/bench/sections/index.mjs. Servers (workerd, the Node peers) run pinned to CPU 0 and wrk to
// CPU 1 when taskset exists. Loopback only; bounded by the options.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, release, tmpdir, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { format } from "node:util";
import { gzipSync } from "node:zlib";
import { benchAsync, printAsync } from "./async.mjs";
import { cpuReader } from "./cpu.mjs";
import { benchFairness, printFairness } from "./fairness.mjs";
import {
  buildBundle,
  configuredBatchSize,
  managementApi,
  SECRETS,
  seedRunnableApp,
  startFloor,
  startGateway,
  startPassthrough,
} from "./gateway.mjs";
import { benchLatency, printLatency } from "./latency.mjs";
import { noiseLine, noiseMeter } from "./noise.mjs";
import { startCountingProxy, startPeer } from "./peers.mjs";
import { figure, median, printRows, printSummary, recordedFigures } from "./report.mjs";
import { benchRunPath, printRunPath } from "./runpath.mjs";
import { sections as registered } from "./sections/index.mjs";
import { timedGet } from "./streaming.mjs";
import { measureUnits } from "./units.mjs";
import { benchUsage, printUsage } from "./usage.mjs";
import { ensureWrk, wrk } from "./wrk.mjs";

const options = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=")));
const SECONDS = Number(options.seconds ?? 3);
const REPS = Number(options.reps ?? 5);
const DOMAINS = Number(options.domains ?? 1000);
const DELIVERIES = Number(options.deliveries ?? 1000);
// (B) is (b'): the bare Worker plus one call of the run's rate-limit binding.
// (A) is a second (b): two identical targets, so what a difference between them reads is the noise.
const TARGETS = options.targets ?? "abABcdef";
const BUILT_IN = "runpath,delivery,latency,fairness,units,domains,async,runcost,usage,bundle";
// Which sections run (all by default): a short run of one section leaves the rest of the machine alone.
const SECTIONS = new Set((options.sections ?? [BUILT_IN, ...registered.map((s) => s.id)].join(",")).split(","));
const section = (name) => SECTIONS.has(name);
// Async runs with webhooks per repetition (and as many synchronous ones); the CI smoke passes fewer deliveries.
const ASYNC_RUNS = Number(options.async ?? Math.min(300, DELIVERIES));
// The async section's side-by-side gateway: its async consumer's runs per invocation (wrangler.toml: 1).
const ASYNC_SIDE_BATCH = Number(options["async-side-batch"] ?? 1);
// The large body of the run path section, and how many event streams time their first byte per rep.
const STREAM_MIB = Number(options["stream-mib"] ?? 100);
const STREAM_SAMPLES = Number(options["stream-samples"] ?? 30 * SECONDS);
// Usage recording (section 7): `--usage=0` skips it.
const USAGE = options.usage !== "0";

// `--out=<path>`: the printed Markdown also goes to <path>.md and the figures to <path>.json, which
// scripts/bench/doc.mjs turns into docs/benchmarks.md.
const OUT = options.out ?? null;

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

const fmt = (n, digits = 2) => (n === null || n === undefined ? "–" : n.toFixed(digits));
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
    const ms = /Active: ([\d.]+) ms/.exec(out)?.[1];
    return ms === undefined ? null : Number(ms);
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

// The noise of each section, printed with it. A section that fails is reported at the end (and the
// command exits 1) without losing the figures of the others.
const noise = {};
const failures = [];
async function measured(name, work) {
  const stop = noiseMeter();
  try {
    return await work();
  } catch (error) {
    failures.push({ name, error });
    log(`section ${name} failed: ${error.stack ?? error}`);
    return null;
  } finally {
    noise[name] = stop();
  }
}
const printNoise = (name) => noise[name] !== undefined && console.log(`\n${noiseLine(noise[name])}`);

const printed = [];
if (OUT) {
  const print = console.log;
  console.log = (...args) => {
    print(...args);
    printed.push(format(...args));
  };
}

ensureWrk();
const workdir = mkdtempSync(join(tmpdir(), "edge-gateway-bench-"));
const cleanup = [];
const startedAt = new Date();
const loadBefore = loadavg();
try {
  log("building the Worker bundle");
  // BENCH_BUNDLE: a bundle built (or changed) beforehand, to measure what one piece of it costs (A/B).
  const bundle = process.env.BENCH_BUNDLE ?? buildBundle(join(workdir, "dist"));
  const bundleBytes = readFileSync(bundle);
  // Startup CPU, profiled as `wrangler check startup` does, up to three times.
  const startup = section("bundle")
    ? Array.from({ length: Math.min(3, REPS) }, () => startupCpu(join(workdir, "startup.cpuprofile")))
    : [];

  const dohUrl = section("domains") || (section("runpath") && TARGETS.includes("d")) ? dnsHarness() : null;
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
  const bareLimited = await startPassthrough(upstream.url, { limiter: true });
  cleanup.push(() => bareLimited.mf.dispose());
  const bareTwin = await startPassthrough(upstream.url);
  cleanup.push(() => bareTwin.mf.dispose());
  const floor = await startFloor(upstream.url, `${floorReceiver.url}/hook`);
  cleanup.push(() => floor.mf.dispose());
  // Section 3 puts DOMAINS domains in the one bench project: above the per-project cap's default.
  // Deliveries are recorded in each project's logs (DELIVERY_LOG_STORE's default); `--delivery-log=d1`: in D1.
  const extraBindings = {
    MAX_DOMAINS_PER_PROJECT: String(Math.min(10_000, DOMAINS + 10)),
    DELIVERY_LOG_STORE: options["delivery-log"] ?? "objects",
  };
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
    {
      id: "A",
      name: "a second bare Worker, the same as (b): the noise of a difference",
      url: `${bareTwin.url}${seed.runPath}`,
    },
    { id: "B", name: "bare Worker + one RATE_LIMIT_RUNS call", url: `${bareLimited.url}${seed.runPath}` },
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
      name: "floor of (e): (b') + 1 Durable Object write before the upstream + 1 queue send after; its consumer signs, POSTs, records in 1 Durable Object write",
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
    deliveryFigures = await measured("delivery", async () => {
      const perRep = [];
      for (let rep = 1; rep <= REPS; rep++) {
        log(`webhook delivery rep ${rep}/${REPS}`);
        let before = slowReceiver.count;
        let started = performance.now();
        await run(slowReceiver);
        await slowReceiver.waitFor(before + 1);
        const single = performance.now() - started;
        before = slowReceiver.count;
        started = performance.now();
        await Promise.all(Array.from({ length: 100 }, () => run(slowReceiver)));
        await slowReceiver.waitFor(before + 100);
        const batchMs = performance.now() - started;
        before = receiver.count;
        started = performance.now();
        await pool(DELIVERIES, 32, () => run(receiver));
        await receiver.waitFor(before + DELIVERIES);
        const fastMs = performance.now() - started;
        perRep.push({ single, batchMs, fastMs });
      }
      return perRep;
    });
  }

  // 2b. A webhook in the time a receiver notices: run's answer → the receiver's request, at 1 and 100 runs/s.
  const latencyFigures = section("latency")
    ? await measured("latency", () =>
        benchLatency({ gatewayUrl: gateway.url, seed, reps: REPS, seconds: SECONDS, log }),
      )
    : null;

  // Fairness, on the real local queue broker (one batch at a time, wrangler.toml's batch size), in a
  // gateway of its own whose attempts time out after 2 s (as in the tests), so its slow lanes drain in
  // seconds and are gone before the run path is measured. Each run made as a user makes it.
  let fairness = null;
  if (section("fairness")) {
    log(
      "fairness: a lane full of receivers that hold each connection for the whole timeout, beside fast ones and a 404",
    );
    fairness = await measured("fairness", async () => {
      const perRep = [];
      for (let rep = 1; rep <= REPS; rep++) {
        log(`fairness rep ${rep}/${REPS}`);
        perRep.push(await benchFairness(bundle, upstream.url));
      }
      return perRep;
    });
  }

  const units = section("units")
    ? await measured("units", async () => {
        const perRep = [];
        for (let rep = 1; rep <= REPS; rep++) {
          log(`unit costs of the local bindings, rep ${rep}/${REPS}`);
          perRep.push(await measureUnits({ receiverUrl: `${receiver.url}/hook`, cpuReader, calls: 300 }));
        }
        return perRep.every(Boolean) ? perRep : null;
      })
    : null;

  // 3. Domain validation: DOMAINS pending domains in all, DOMAINS ÷ REPS a repetition, due now, checked by
  // one cron run and its fan-out.
  let domainFigures = null;
  if (doh && section("domains")) {
    const perRepDomains = Math.ceil(DOMAINS / REPS);
    // The design's own numbers, read from the source so the table cannot drift from it.
    const source = ["cron", "rules", "caa"].map((file) => readFileSync(`src/domains/${file}.ts`, "utf8")).join("\n");
    const constant = (name) => Number(new RegExp(`${name} = ([\\d_]+)`).exec(source)?.[1].replace(/_/g, ""));
    const design = {
      limit: constant("SUBREQUEST_LIMIT"),
      // `SUBREQUESTS_PER_CHECK = MAX_QUERIES_PER_CHECK + 5`: a sum of constants and numbers.
      perCheck: /SUBREQUESTS_PER_CHECK = ([^;]+);/
        .exec(source)[1]
        .split("+")
        .reduce((sum, term) => sum + (/^\s*\d+\s*$/.test(term) ? Number(term) : constant(term.trim())), 0),
      perBatch: constant("CHECKS_PER_QUEUE_BATCH"),
      inline: constant("INLINE_CHECKS_PER_CRON"),
    };
    domainFigures = await measured("domains", async () => {
      const perRep = [];
      for (let rep = 1; rep <= REPS; rep++) {
        log(`domain validation rep ${rep}/${REPS}: creating ${perRepDomains} domains`);
        const tag = `${Date.now().toString(36)}r${rep}`;
        await pool(perRepDomains, 16, (i) =>
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
          if (validated >= perRepDomains) break;
          await sleep(200);
        }
        perRep.push({ validated, ms: performance.now() - started, queries: doh.count - queriesBefore });
      }
      return { perRep, perRepDomains, design };
    });
  }

  // 1. Run path, interleaved repetitions, the order alternating between them.
  const results = Object.fromEntries(
    targets.map((t) => [t.id, { rps: [], drainedRps: [], p50: [], p99: [], p99at16: [], cpu: [], bad: 0 }]),
  );
  const runpathNoise = [];
  if (targets.length)
    await measured("runpath", async () => {
      for (let rep = 1; rep <= REPS; rep++) {
        const stop = noiseMeter();
        for (const target of rep % 2 ? targets : [...targets].reverse()) {
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
          const r = results[target.id];
          r.drainedRps.push((load.rps * SECONDS) / (SECONDS + drainMs / 1000));
          if (target.cpu) r.cpu.push((target.cpu() - cpuBefore) / (load.rps * SECONDS));
          const one = await wrk({ ...target, connections: 1, seconds: SECONDS, cpu: WRK_CPU });
          if (target.drains) await drained(target.drains);
          log(
            `   ${load.rps} req/s at 16, p50 ${one.p50} ms at 1${r.cpu.length ? `, ${fmt(r.cpu.at(-1), 3)} ms CPU/req` : ""}`,
          );
          r.rps.push(load.rps);
          r.p99at16.push(load.p99);
          r.p50.push(one.p50);
          r.p99.push(one.p99);
          r.bad += load.non2xx + one.non2xx;
        }
        runpathNoise.push(stop());
      }
    });

  // 6. Async runs with webhooks, drained, beside synchronous runs with webhooks, per repetition.
  // Beside it, the same bundle with its async consumer given ASYNC_SIDE_BATCH runs per invocation (by
  // default 1, as before wrangler.toml's batches of 3): what the batch saves, measured in the same reps.
  const asyncFigures =
    ASYNC_RUNS > 0 && section("async")
      ? (log(`async runs: ${ASYNC_RUNS} with webhooks per rep, and as many synchronous ones`),
        await measured("async", async () => {
          const sideGateway = await startGateway(bundle, { batchSizes: { "async-runs": ASYNC_SIDE_BATCH } });
          const sideReceiver = await startPeer({ status: 204 });
          try {
            const side = {
              gateway: sideGateway,
              seed: await seedRunnableApp(sideGateway.url, upstream.url),
              receiver: sideReceiver,
              cpu: cpuReader(sideGateway.url),
              batchSize: ASYNC_SIDE_BATCH,
              mainBatch: configuredBatchSize("async-runs"),
            };
            const cpu = cpuReader(gateway.url);
            return await benchAsync({ gateway, seed, receiver, count: ASYNC_RUNS, reps: REPS, cpu, side, log });
          } finally {
            await sideGateway.mf.dispose();
            await sideReceiver.close();
          }
        }))
      : null;

  // 8. The run path's binary answer and bodies against (b) and (b'), and each remaining cost alone.
  const runCost = section("runcost")
    ? (log("run path: binary answer, bodies, first byte, and each cost alone"),
      await measured("runcost", () =>
        benchRunPath({
          bundle,
          seconds: SECONDS,
          reps: REPS,
          mib: STREAM_MIB,
          samples: STREAM_SAMPLES,
          wrkCpu: WRK_CPU,
          log,
        }),
      ))
    : null;
  // 7. Usage recording: the run path with recording on and off, and the usage queries over a busy week.
  const usageFigures =
    USAGE && section("usage")
      ? await measured("usage", () =>
          benchUsage({ bundle, upstreamUrl: upstream.url, seconds: SECONDS, reps: REPS, wrkCpu: WRK_CPU, log }),
        )
      : null;

  // Sections registered by other parts of the gateway (scripts/bench/sections/).
  const ctx = {
    bundle,
    seconds: SECONDS,
    reps: REPS,
    wrkCpu: WRK_CPU,
    log,
    wrk,
    options,
    startGateway,
    seedRunnableApp,
    startPeer,
    cpuReader,
    timedGet,
    pool,
  };
  const extra = [];
  for (const s of registered.filter((s) => section(s.id))) {
    log(`section ${s.id}: ${s.title}`);
    extra.push({ section: s, result: await measured(s.id, () => s.run(ctx)) });
  }

  if (targets.length) {
    console.log(
      `\n## 1. Run path (wrk: 16 connections for req/s, CPU and p99, 1 for p50; ${SECONDS} s each; ${REPS} interleaved reps)\n`,
    );
    console.log("| target | req/s | p50 ms at 1 | p99 ms at 16 | workerd CPU ms/req | non-2xx |");
    console.log("|---|---:|---:|---:|---:|---:|");
    for (const target of targets) {
      const r = results[target.id];
      console.log(
        `| (${{ A: "b₂", B: "b'" }[target.id] ?? target.id}) ${target.name} | ${fmt(median(r.rps), 0)} | ${fmt(median(r.p50), 3)} | ${fmt(median(r.p99at16), 1)} | ${fmt(median(r.cpu), 3)} | ${r.bad} |`,
      );
    }
    // Each ratio and difference is taken within a repetition (the targets of one rep ran seconds apart).
    const per = (x, y, key, op) =>
      results[x] && results[y] ? results[x][key].map((v, i) => op(v, results[y][key][i])) : [];
    const ratio = (x, y, key) => per(x, y, key, (p, q) => p / q);
    const diff = (x, y, key) => per(x, y, key, (p, q) => p - q);
    const rows = [];
    for (const [id, what] of [
      ["c", "(c)"],
      ["d", "(d) custom domain"],
    ]) {
      if (!results[id]) continue;
      rows.push(
        figure(`${what} req/s`, ratio(id, "B", "rps"), {
          unit: "x",
          target: [">=", 0.9],
          vs: "(b')",
          key: `${id}-rps`,
        }),
        figure(`${what} workerd CPU per run`, diff(id, "B", "cpu"), {
          unit: "ms",
          digits: 3,
          signed: true,
          cost: true,
          target: ["<=", 0.1],
          vs: "(b')",
          key: `${id}-cpu`,
        }),
        figure(`${what} p99 at 16 connections`, ratio(id, "B", "p99at16"), {
          unit: "x",
          target: ["<=", 1.5],
          vs: "(b')",
          key: `${id}-p99`,
        }),
        figure(`${what} req/s`, ratio(id, "b", "rps"), { unit: "x", vs: "(b)" }),
        figure(`${what} workerd CPU per run`, diff(id, "b", "cpu"), {
          unit: "ms",
          digits: 3,
          signed: true,
          cost: true,
          vs: "(b)",
        }),
        figure(`${what} p50 at 1 connection`, diff(id, "b", "p50"), {
          unit: "ms",
          digits: 3,
          signed: true,
          cost: true,
          vs: "(b)",
        }),
      );
    }
    if (results.A && results.b)
      rows.push(
        figure("A/A: a second (b), req/s", ratio("A", "b", "rps"), { unit: "x", vs: "(b)" }),
        figure("A/A: a second (b), workerd CPU per run", diff("A", "b", "cpu"), {
          unit: "ms",
          digits: 3,
          signed: true,
          vs: "(b)",
          note: "(no cost: what the noise alone makes of a difference)",
        }),
        figure("A/A: a second (b), p99 at 16 connections", ratio("A", "b", "p99at16"), { unit: "x", vs: "(b)" }),
      );
    if (results.B && results.b)
      rows.push(
        figure("(b') the local limiter's stand-in: CPU per run", diff("B", "b", "cpu"), {
          unit: "ms",
          digits: 3,
          signed: true,
          cost: true,
          vs: "(b)",
        }),
        figure("(b') req/s", ratio("B", "b", "rps"), { unit: "x", vs: "(b)" }),
      );
    if (results.e && results.f) {
      rows.push(
        figure("(e) drained throughput: runs ÷ (load + its deliveries' drain)", ratio("e", "f", "drainedRps"), {
          unit: "x",
          target: [">=", 0.9],
          vs: "(f)",
          key: "e-drained",
        }),
        figure(
          "(e) by CPU per run, deliveries included: (f)'s CPU ÷ (e)'s",
          per("f", "e", "cpu", (f, e) => f / e),
          { unit: "x", target: [">=", 0.9], vs: "(f)", key: "e-cpu" },
        ),
        figure("(e) − (f), CPU per run", diff("e", "f", "cpu"), {
          unit: "ms",
          digits: 3,
          signed: true,
          cost: true,
          vs: "(f)",
        }),
        figure("(e) req/s during the load", ratio("e", "f", "rps"), { unit: "x", vs: "(f)" }),
      );
    }
    printRows("", rows, { section: "1. run path" });
    console.log(
      `\nNoise per rep (other processes' CPU while the rep ran, share of one core): ${runpathNoise.map((n) => (n ? n.othersShare.toFixed(2) : "–")).join(", ")}.`,
    );
    printNoise("runpath");
  }

  if (deliveryFigures || fairness)
    console.log("\n## 2. Webhook delivery (queue consumer in workerd, receivers on loopback)\n");
  if (deliveryFigures) {
    const each = (pick) => deliveryFigures.map(pick);
    printRows(
      "",
      [
        figure(
          "one delivery to a receiver answering after 200 ms, run → received",
          each((r) => r.single),
          { unit: "ms", digits: 0 },
        ),
        figure(
          "100 deliveries to that receiver at once, first run → last received",
          each((r) => r.batchMs),
          { unit: "ms", digits: 0 },
        ),
        figure(
          "the same, ÷ one delivery",
          each((r) => r.batchMs / r.single),
          { unit: "x" },
        ),
        figure(
          `${DELIVERIES} deliveries to a fast receiver (runs made 32 at a time), deliveries/s`,
          each((r) => DELIVERIES / (r.fastMs / 1000)),
          {
            unit: "/s",
            digits: 0,
          },
        ),
      ],
      { section: "2. delivery" },
    );
    printNoise("delivery");
  }
  if (latencyFigures) {
    printLatency(latencyFigures);
    printNoise("latency");
  }
  if (fairness) {
    printFairness(fairness);
    printNoise("fairness");
  }

  if (units) {
    const each = (pick) => units.map(pick);
    const us = { unit: "µs", digits: 0 };
    printRows(
      `### Unit costs of the local bindings (workerd CPU per call, in a Worker's loop, on the real schema; ${units.length} reps)`,
      [
        figure(
          "D1: a delivery's pending row (INSERT), its own round trip",
          each((u) => u.pending),
          { ...us, key: "unit-d1-pending" },
        ),
        figure(
          "D1: one claim (upsert), its own round trip",
          each((u) => u.claim),
          us,
        ),
        figure(
          "D1: three claims in one `batch` (group commit)",
          each((u) => u.claims3),
          us,
        ),
        figure(
          "D1: three outcomes (INSERT + trigger) in one `batch`",
          each((u) => u.outcomes3),
          us,
        ),
        figure(
          "D1 per first-attempt delivery, batches of 3: pending + (claims + outcomes) ÷ 3",
          each((u) => u.pending + (u.claims3 + u.outcomes3) / 3),
          us,
        ),
        figure(
          "Queues: one `send`",
          each((u) => u.send),
          { ...us, key: "unit-send" },
        ),
        figure(
          "fetch: one POST to a loopback receiver",
          each((u) => u.post),
          us,
        ),
        figure(
          "Durable Object: a lane's `accept` of a batch of 10 (RPC + 10 SQLite inserts), per delivery",
          each((u) => u.accept10),
          { ...us, key: "unit-accept10" },
        ),
        figure(
          "Durable Object: the lane's delete of a settled delivery (RPC per 10), per delivery",
          each((u) => u.settle10),
          { ...us, key: "unit-settle10" },
        ),
        figure(
          "one log line (`console.log` of a request line)",
          each((u) => u.log),
          us,
        ),
      ],
      { section: "2. units" },
    );
    printNoise("units");
  }

  if (domainFigures) {
    const { perRep, perRepDomains, design: d } = domainFigures;
    printRows(
      `## 3. Domain validation (${perRepDomains} pending domains a rep, ${perRep.length} reps; real DNS: knot behind dnsdist, through a counting DoH proxy)`,
      [
        figure(
          "validated by one cron run and its queue fan-out, domains/s",
          perRep.map((r) => r.validated / (r.ms / 1000)),
          {
            unit: "/s",
            digits: 1,
          },
        ),
        figure(
          "domains validated of those created",
          perRep.map((r) => r.validated / perRepDomains),
          { unit: "x" },
        ),
        figure(
          "DoH queries per domain",
          perRep.map((r) => r.queries / Math.max(1, r.validated)),
          { digits: 2 },
        ),
      ],
      { section: "3. domains" },
    );
    console.log(
      `\nSubrequests per invocation, bound by design (src/domains/cron.ts): ≤ ${d.perCheck} per check × ${d.perBatch} checks per queue batch (${d.inline} inline in the cron run); limit ${d.limit}.`,
    );
    printNoise("domains");
  }

  if (section("bundle")) {
    console.log("\n## 4. Bundle\n");
    console.log("| figure | value |");
    console.log("|---|---:|");
    console.log(`| size (raw) | ${fmt(bundleBytes.length / 1024, 1)} KiB |`);
    console.log(
      `| size (gzip) | ${fmt(gzipSync(bundleBytes, { level: 9 }).length / 1024, 1)} KiB (Workers limit 3 MiB Free, 10 MiB Paid) |`,
    );
    const profiled = startup.filter((v) => v !== null);
    console.log(
      `| startup (module evaluation) CPU, \`wrangler check startup\` profile, ${profiled.length} times | ${profiled.length ? `median ${fmt(median(profiled), 1)} ms (${fmt(Math.min(...profiled), 1)} … ${fmt(Math.max(...profiled), 1)})` : "–"} (Workers limit: 1 s) |`,
    );
    console.log(
      `| Miniflare start, gateway ÷ bare Worker (workerd boot included; one start each) | ${fmt(gateway.startupMs / bare.startupMs)} (${fmt(gateway.startupMs, 0)} ms vs ${fmt(bare.startupMs, 0)} ms) |`,
    );
  }
  if (asyncFigures) {
    try {
      printAsync(asyncFigures);
    } catch (error) {
      failures.push({ name: "async", error });
    }
    printNoise("async");
  }
  if (runCost) {
    printRunPath(runCost);
    printNoise("runcost");
  }
  if (usageFigures) {
    printUsage(usageFigures, fmt);
    printNoise("usage");
  }
  for (const { section: s, result } of extra) {
    console.log(`\n## ${s.title}\n`);
    if (result?.rows?.length) printRows("", result.rows, { section: s.id });
    for (const note of result?.notes ?? []) console.log(`\n${note}`);
    printNoise(s.id);
  }
  printSummary();
  for (const { name, error } of failures) console.log(`\n**Section ${name} failed**: ${error.message ?? error}`);
  if (failures.length) process.exitCode = 1;
  const loadAfter = loadavg();
  const machine = {
    cpus: cpus().length,
    model: cpus()[0]?.model ?? "?",
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    node: process.version,
    workerd: (() => {
      try {
        return JSON.parse(readFileSync("node_modules/workerd/package.json", "utf8")).version;
      } catch {
        return null;
      }
    })(),
    pinned: hasTaskset,
  };
  const settings = {
    seconds: SECONDS,
    reps: REPS,
    domains: DOMAINS,
    deliveries: DELIVERIES,
    async: ASYNC_RUNS,
    targets: TARGETS,
    streamMib: STREAM_MIB,
    streamSamples: STREAM_SAMPLES,
    sections: [...SECTIONS],
  };
  console.log(
    `\nmachine: ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}), ${fmt(totalmem() / 2 ** 30, 0)} GiB; started ${startedAt.toISOString()}, ended ${new Date().toISOString()}; load average ${loadBefore.map((l) => fmt(l)).join(" ")} before, ${loadAfter.map((l) => fmt(l)).join(" ")} after; servers on CPU 0 and wrk on CPU 1: ${hasTaskset}; options ${JSON.stringify({ seconds: SECONDS, reps: REPS, domains: DOMAINS, deliveries: DELIVERIES, async: ASYNC_RUNS, targets: TARGETS, streamMib: STREAM_MIB, streamSamples: STREAM_SAMPLES })}; SECRETS are bench-only (${Object.keys(SECRETS).length}).`,
  );
  if (OUT) {
    mkdirSync(dirname(OUT), { recursive: true });
    writeFileSync(`${OUT}.md`, `${printed.join("\n")}\n`);
    writeFileSync(
      `${OUT}.json`,
      `${JSON.stringify(
        {
          command: `npm run bench -- ${process.argv.slice(2).join(" ")}`.trim(),
          startedAt: startedAt.toISOString(),
          endedAt: new Date().toISOString(),
          loadAverage: { before: loadBefore, after: loadAfter },
          machine,
          settings,
          noise,
          failures: failures.map(({ name, error }) => ({ name, error: String(error?.message ?? error) })),
          ...recordedFigures(),
        },
        null,
        2,
      )}\n`,
    );
    log(`wrote ${OUT}.md and ${OUT}.json`);
  }
} finally {
  for (const close of cleanup.reverse()) await close();
  rmSync(workdir, { recursive: true, force: true });
}
