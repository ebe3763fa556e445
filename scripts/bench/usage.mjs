// Usage recording: what recording costs a run, and how fast the usage figures answer. Two gateways of
// the same bundle, one with recording off (USAGE_RECORDING = "off": the seam does nothing), loaded in
// interleaved repetitions; the difference of their workerd CPU per run is recording's cost. Then one
// busy app's 7 days of records go into the project's ledger, and the usage API is timed over them.
// Part of `npm run bench`; alone: `node scripts/bench/usage.mjs [--seconds=3 --reps=5]`.
import { writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { cpuReader } from "./cpu.mjs";
import {
  buildBundle,
  COMPATIBILITY_DATE,
  managementApi,
  seedRunnableApp,
  startGateway,
  startWorker,
} from "./gateway.mjs";
import { startPeer } from "./peers.mjs";
import { cost, figure, median, printRows, printSummary } from "./report.mjs";
import { ensureWrk, wrk } from "./wrk.mjs";
import { SECRETS } from "./gateway.mjs";

const DAY_MS = 86_400_000;
/** One busy app's week: a run every 6 s (100,800 records, 10,080 minute rollups), above the exact-percentile bound. */
const BUSY_EVERY_MS = 6_000;
const SEED_BATCH = 2_000;
/**
 * The documented worst case of the usage queries (docs/usage.md, "The worst query"): besides the busy
 * app's week (100,800 records: past the runs list's scan bound of 25,000 and the exact percentiles'
 * 25,000), WIDE_APPS more apps with a run every 6 hours for 90 days, so every hour of the 90 days has
 * rollups of many apps. The queries' rows do not grow with either (the test proves it); this measures them.
 */
const WIDE_APPS = 100;
const WIDE_EVERY_MS = 6 * 3_600_000;

const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";
/** A run id as the gateway makes them: `run_`, 10 characters of its time, 20 more. */
function runIdAt(at, n) {
  let time = "";
  for (let t = at, i = 0; i < 10; i++, t = Math.floor(t / 32)) time = CROCKFORD[t % 32] + time;
  return `run_${time}${n.toString(32).padStart(20, "0")}`;
}

/** A run of each of WIDE_APPS apps every 6 hours over the last 90 days. */
function wideQuarter(projectId, now) {
  const records = [];
  for (let at = now - 90 * DAY_MS + 60_000; at < now; at += WIDE_EVERY_MS)
    for (let a = 0; a < WIDE_APPS; a++) {
      const duration = Math.round(20 * Math.exp(Math.random() * 3));
      records.push({
        ...busyRecord(projectId, `app-${a}`, at + a, records.length + 1e7, duration, 200),
        caller: "sa:others",
      });
    }
  return records;
}

/** One record of `appName` at `at`. */
function busyRecord(projectId, appName, at, n, duration, status) {
  return {
    run_id: runIdAt(at, n),
    project_id: projectId,
    app_name: appName,
    mode: "sync",
    method: "POST",
    path: "v1/chat/completions",
    status_code: status,
    ending: "answered",
    failure: status >= 400 ? `app:${status}` : null,
    duration_ms: duration,
    ttfb_ms: Math.round(duration / 4),
    called_ms: 1,
    answered_ms: Math.round(duration / 5),
    handed_over_ms: null,
    bytes_in: 512,
    bytes_out: 2048,
    caller: "sa:bench",
    webhook: false,
    request_id: "req_bench",
    created_at: at,
  };
}

/** `count` records of `appName` spread over the last 7 days, statuses and durations as a real app's. */
function busyWeek(projectId, appName, now) {
  const records = [];
  for (let at = now - 7 * DAY_MS + 1; at < now; at += BUSY_EVERY_MS) {
    const roll = Math.random();
    const status = roll < 0.95 ? 200 : roll < 0.98 ? 429 : 500;
    const duration = Math.round(20 * Math.exp(Math.random() * 3));
    records.push(busyRecord(projectId, appName, at, records.length, duration, status));
  }
  return records;
}

/** Wall times (ms) of `n` GETs of `url`, each checked 200. */
async function timed(url, headers, n) {
  const times = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const response = await fetch(url, { headers });
    const body = await response.text();
    if (!response.ok) throw new Error(`bench usage: ${url}: ${response.status} ${body}`);
    times.push(performance.now() - started);
  }
  return times;
}

/**
 * The recording code itself (src/usage/buffer.ts, bundled as it is) in a Worker's loop: `n` records
 * handed to the seam as n runs would, flushed in batches to the real ledger (a local Durable Object in
 * the same process). The per-record CPU, with and without the ledger's ingest, is the run path's cost
 * of recording without the noise of a whole run around it. `projects` spreads the records over that
 * many projects (one ledger call per project per batch).
 */
async function measureSeam(workdir, cpuOf, { nullLedger }) {
  const name = nullLedger ? "seam-null" : "seam";
  const entry = join(workdir, `${name}.mjs`);
  const src = resolve("src/usage");
  writeFileSync(
    entry,
    `import { holdRecord, flush } from ${JSON.stringify(join(src, "buffer.ts"))};
import { usageConfigOf } from ${JSON.stringify(resolve("src/platform/env.ts"))};
${
  nullLedger
    ? // A ledger that keeps nothing: what is left is the run's side (push, batch, the call itself).
      'import { DurableObject } from "cloudflare:workers";\nexport class UsageLedger extends DurableObject { add(records) { return { added: records.length }; } }'
    : `export { UsageLedger } from ${JSON.stringify(join(src, "ledger-object.ts"))};`
}
let next = 0;
let timerSeen = false;
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n"));
    const projects = Number(url.searchParams.get("projects"));
    // The first work handed to waitUntil in the isolate is the flush timer (USAGE_FLUSH_MS, set far
    // off): not waited for; every batch's flush is.
    const waits = [];
    const scope = { env, config: { usage: usageConfigOf(env) }, requestId: "req_seam", ctx: { waitUntil: (p) => (timerSeen ? waits.push(p) : (timerSeen = true)) } };
    for (let i = 0; i < n; i++) {
      const at = Date.now();
      next++;
      holdRecord(scope, { run_id: "run_seam" + at.toString(36) + next.toString(36).padStart(8, "0"), project_id: "proj_seam" + (next % projects), app_name: "app", mode: "sync", method: "POST", path: "run", status_code: 200, ending: "answered", failure: null, duration_ms: 12, ttfb_ms: null, called_ms: 1, answered_ms: 10, handed_over_ms: null, bytes_in: 100, bytes_out: 200, caller: "sa:seam", webhook: false, request_id: "req_seam", created_at: at });
    }
    await flush(env);
    await Promise.all(waits);
    return new Response("ok");
  },
};`,
  );
  const outfile = join(workdir, `${name}-bundle.mjs`);
  await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    outfile,
    external: ["cloudflare:*", "node:*"],
    logLevel: "silent",
  });
  const mf = startWorker({
    scriptPath: outfile,
    modulesRoot: workdir,
    compatibilityFlags: ["nodejs_als"],
    bindings: { USAGE_FLUSH_MS: "600000" },
    durableObjects: { USAGE_LEDGER: { className: "UsageLedger", useSQLite: true } },
    // Batches of several projects leave in one queue send (consumed elsewhere: the producer's cost is the run's).
    queueProducers: { USAGE_QUEUE: { queueName: "usage-records" } },
  });
  try {
    const url = (await mf.ready).origin;
    const cpu = cpuOf(url);
    if (!cpu) return null;
    const per = async (n, projects) => {
      await fetch(`${url}/?n=200&projects=${projects}`);
      const before = cpu();
      for (let i = 0; i < 10; i++) {
        const response = await fetch(`${url}/?n=${n / 10}&projects=${projects}`);
        if (!response.ok) throw new Error(`bench usage seam: ${response.status} ${await response.text()}`);
      }
      return (cpu() - before) / n;
    };
    return { oneProject: await per(20_000, 1), fiftyProjects: await per(20_000, 50), date: COMPATIBILITY_DATE };
  } finally {
    await mf.dispose();
  }
}

/** The section's figures: run path CPU with and without recording, the ledger's ingest, the usage queries. */
export async function benchUsage({ bundle, upstreamUrl, seconds, reps, wrkCpu, log }) {
  const gateways = {};
  const closers = [];
  try {
    log("usage: the recording seam in a loop");
    // Each seam measured up to three times (a fresh Worker each), so its figure has a spread too.
    const seam = [];
    const runSide = [];
    for (let i = 0; i < Math.min(3, reps); i++) {
      seam.push(await measureSeam(dirname(bundle), cpuReader, { nullLedger: false }));
      runSide.push(await measureSeam(dirname(bundle), cpuReader, { nullLedger: true }));
    }
    for (const [name, extraBindings] of [
      ["on", {}],
      ["off", { USAGE_RECORDING: "off" }],
    ]) {
      // The Worker's own log lines (one per request) are not the bench's output.
      const sharedOptions = { handleRuntimeStdio: (stdout, stderr) => (stdout.resume(), stderr.resume()) };
      const gateway = await startGateway(bundle, { extraBindings, sharedOptions });
      closers.push(() => gateway.mf.dispose());
      const seed = await seedRunnableApp(gateway.url, upstreamUrl);
      const target = { url: `${gateway.url}${seed.runPath}`, headers: { Authorization: `Bearer ${seed.token}` } };
      const check = await fetch(target.url, { headers: target.headers });
      if (!check.ok) throw new Error(`bench usage: ${name}: ${check.status} ${await check.text()}`);
      gateways[name] = { gateway, seed, target, cpu: cpuReader(gateway.url), perRun: [], rps: [] };
    }
    if (!gateways.on.cpu) return null;
    for (let rep = 1; rep <= reps; rep++) {
      for (const name of ["off", "on"]) {
        const g = gateways[name];
        const before = g.cpu();
        const load = await wrk({ ...g.target, connections: 16, seconds, cpu: wrkCpu });
        // Recording's flush waits up to a second after the load: its CPU is counted.
        await new Promise((resolve) => setTimeout(resolve, 1_200));
        g.perRun.push((g.cpu() - before) / (load.rps * seconds));
        g.rps.push(load.rps);
        log(`usage rep ${rep}/${reps}: recording ${name}: ${load.rps} req/s, ${g.perRun.at(-1).toFixed(4)} ms CPU/run`);
      }
    }
    const { gateway, seed } = gateways.on;
    const listed = await managementApi(gateway.url)(seed.token, "GET", `/projects/${seed.projectId}/runs?limit=1`);
    const recordedRuns = listed.data.length;

    log("usage: seeding 7 days of one busy app into the project's ledger");
    const now = Date.now();
    const week = busyWeek(seed.projectId, "busy-app", now);
    const namespace = await gateway.mf.getDurableObjectNamespace("USAGE_LEDGER");
    const ledger = namespace.get(namespace.idFromName(seed.projectId));
    const cpuBefore = gateways.on.cpu();
    const seedStarted = performance.now();
    for (let i = 0; i < week.length; i += SEED_BATCH) await ledger.add(week.slice(i, i + SEED_BATCH));
    const ingest = {
      records: week.length,
      ms: performance.now() - seedStarted,
      cpuPerRecord: (gateways.on.cpu() - cpuBefore) / week.length,
    };
    // The week's storage: what a record costs the object's 10 GB (rollups included, spread over the records).
    // Plain numbers: the answer is a stub of the runtime's, gone once the gateway is disposed.
    const stats = await ledger.stats();
    ingest.stats = { records: Number(stats.records), rollups: Number(stats.rollups), bytes: Number(stats.bytes) };
    log(`usage: seeding ${WIDE_APPS} more apps over 90 days (the worst case of the queries)`);
    const wide = wideQuarter(seed.projectId, now);
    for (let i = 0; i < wide.length; i += SEED_BATCH) await ledger.add(wide.slice(i, i + SEED_BATCH));

    const base = `${gateway.url}/v2/projects/${seed.projectId}`;
    const auth = { Authorization: `Bearer ${seed.token}` };
    const iso = (ms) => new Date(ms).toISOString();
    const week7 = `from=${iso(now - 7 * DAY_MS)}&to=${iso(now)}&app_name=busy-app`;
    const probe = await (await fetch(`${base}/usage?${week7}&interval=hour`, { headers: auth })).json();
    const day = await (
      await fetch(`${base}/usage?from=${iso(now - DAY_MS)}&to=${iso(now)}&app_name=busy-app&interval=hour`, {
        headers: auth,
      })
    ).json();
    // Each query timed once per repetition (at least 5), the queries interleaved.
    const urls = {
      weekHourly: `${base}/usage?${week7}&interval=hour`,
      weekDaily: `${base}/usage?${week7}&interval=day`,
      dayHourlyExact: `${base}/usage?from=${iso(now - DAY_MS)}&to=${iso(now)}&app_name=busy-app&interval=hour`,
      dayByMinute: `${base}/usage?from=${iso(now - DAY_MS)}&to=${iso(now)}&app_name=busy-app&interval=minute`,
      runsPage: `${base}/runs?app_name=busy-app&status=5xx&limit=100`,
    };
    // The worst queries a usage:read holder can make (docs/usage.md): 2,160 points over every app, one
    // app's 90 days, the widest exact-percentile range (just under EXACT_MAX records), and runs lists
    // whose filters match nothing (the scan bound), as a person sees the project's runs (the admin
    // token) and as a service account sees its own.
    const hour = 3_600_000;
    const aligned = Math.floor(now / hour) * hour + hour;
    const people = { Authorization: `Bearer ${SECRETS.ADMIN_TOKEN}` };
    const worstUrls = {
      quarterHourly: `${base}/usage?from=${iso(aligned - 90 * DAY_MS)}&to=${iso(aligned)}&interval=hour`,
      quarterHourlyApp: `${base}/usage?from=${iso(aligned - 90 * DAY_MS)}&to=${iso(aligned)}&interval=hour&app_name=app-7`,
      quarterDaily: `${base}/usage?from=${iso(aligned - 89 * DAY_MS)}&to=${iso(aligned)}&interval=day`,
      minutes36h: `${base}/usage?from=${iso(aligned - 36 * hour)}&to=${iso(aligned)}&interval=minute`,
      // Just under EXACT_MAX (25,000) of the busy app's runs: 41 hours at one every 6 s (24,600).
      exactMax: `${base}/usage?from=${iso(aligned - 41 * hour)}&to=${iso(aligned)}&interval=hour&app_name=busy-app`,
      listNothing: `${base}/runs?status=5xx&mode=async&limit=100`,
      listOwn: `${base}/runs?status=5xx&mode=async&limit=100`,
    };
    const authOf = (k) => (k in worstUrls && k !== "listOwn" ? people : auth);
    const probeExact = await (await fetch(worstUrls.exactMax, { headers: auth })).json();
    const times = Object.fromEntries([...Object.keys(urls), ...Object.keys(worstUrls)].map((k) => [k, []]));
    for (let i = 0; i < Math.max(5, reps); i++)
      for (const [k, url] of Object.entries({ ...urls, ...worstUrls }))
        times[k].push(...(await timed(url, authOf(k), 1)));
    const queries = {
      ...times,
      weekRuns: probe.totals.runs,
      weekPercentiles: probe.percentiles,
      dayRuns: day.totals.runs,
      dayPercentiles: day.percentiles,
      exactRuns: probeExact.totals.runs,
      exactPercentiles: probeExact.percentiles,
      wideRecords: wide.length,
    };
    const paired = median(gateways.on.perRun.map((v, i) => v - gateways.off.perRun[i]));
    return {
      perRunOn: gateways.on.perRun,
      perRunOff: gateways.off.perRun,
      seam,
      runSide,
      off: median(gateways.off.perRun),
      on: median(gateways.on.perRun),
      extra: paired,
      rpsOn: median(gateways.on.rps),
      rpsOff: median(gateways.off.rps),
      recordedRuns,
      ingest,
      queries,
      reps,
      seconds,
    };
  } finally {
    for (const close of closers.reverse()) await close();
  }
}

export function printUsage(u, fmt) {
  const q = u.queries;
  const kinds = [
    "weekHourly",
    "weekDaily",
    "dayHourlyExact",
    "dayByMinute",
    "runsPage",
    "quarterHourly",
    "quarterHourlyApp",
    "quarterDaily",
    "minutes36h",
    "exactMax",
    "listNothing",
    "listOwn",
  ];
  printRows(
    `## 7. Usage recording (two gateways of one bundle, recording on and off; wrk 16 connections, ${u.seconds} s, ${u.reps} interleaved reps; each usage query timed ${q.weekHourly.length} times, interleaved)`,
    [
      figure(
        `the worst query a usage:read holder can make, of the ${kinds.length} below, per round (${q.wideRecords + q.weekRuns} records, ${WIDE_APPS + 1} apps)`,
        q.weekHourly.map((_, i) => Math.max(...kinds.map((k) => q[k][i]))),
        { unit: "ms", digits: 1, key: "usage-worst", target: ["<=", 200] },
      ),
      figure("usage, 90 days by the hour, every app (2,160 points)", q.quarterHourly, { unit: "ms", digits: 1 }),
      figure("usage, 90 days by the hour, one app", q.quarterHourlyApp, { unit: "ms", digits: 1 }),
      figure("usage, 89 days by the day, every app", q.quarterDaily, { unit: "ms", digits: 1 }),
      figure("usage, 36 hours by the minute, every app (2,160 points)", q.minutes36h, { unit: "ms", digits: 1 }),
      figure(
        `usage, the widest exact range: 41 hours of the busy app (${q.exactRuns} runs; percentiles: ${q.exactPercentiles})`,
        q.exactMax,
        { unit: "ms", digits: 1 },
      ),
      figure("runs list, a filter matching nothing (scans its bound, 25,000 records)", q.listNothing, {
        unit: "ms",
        digits: 1,
      }),
      figure("runs list, a service account's own, a filter matching nothing", q.listOwn, { unit: "ms", digits: 1 }),
      figure(
        `usage, one busy app's 7 days by the hour (${q.weekRuns} runs; percentiles: ${q.weekPercentiles})`,
        q.weekHourly,
        {
          unit: "ms",
          digits: 1,
        },
      ),
      figure("usage, 7 days by the day", q.weekDaily, { unit: "ms", digits: 1 }),
      figure(`usage, 24 hours by the hour (${q.dayRuns} runs; percentiles: ${q.dayPercentiles})`, q.dayHourlyExact, {
        unit: "ms",
        digits: 1,
      }),
      figure("usage, 24 hours by the minute (1,440 points)", q.dayByMinute, { unit: "ms", digits: 1 }),
      figure("runs list, one app's 5xx, 100 per page", q.runsPage, { unit: "ms", digits: 1 }),
      figure("workerd CPU per run, recording off", u.perRunOff, { unit: "ms", digits: 4 }),
      figure("workerd CPU per run, recording on (the local ledger's work included)", u.perRunOn, {
        unit: "ms",
        digits: 4,
      }),
    ],
    { section: "7. usage" },
  );
  console.log("\n| figure | value |");
  console.log("|---|---:|");
  console.log(
    `| recording's cost per run, on − off paired per rep (the local ledger's ingest included) | ${cost(u.perRunOn, u.perRunOff, { digits: 4 })} |`,
  );
  console.log(
    `| the ledger's ingest alone, per record (${u.ingest.records} records in batches of ${SEED_BATCH}; one measurement) | ${fmt(u.ingest.cpuPerRecord, 4)} ms CPU (${fmt(u.ingest.ms, 0)} ms wall) |`,
  );
  const seamRow = (label, list, key) => {
    const values = list.filter(Boolean).map((m) => m[key]);
    if (values.length === 0) return;
    const spread =
      values.length > 1
        ? ` (${fmt(Math.min(...values), 4)} … ${fmt(Math.max(...values), 4)}, ${values.length} times)`
        : " (once)";
    console.log(`| ${label} | **${fmt(median(values), 4)} ms**${spread} |`);
  };
  seamRow(
    "the seam alone (src/usage/buffer.ts in a loop of 20,000: push, batches of 200, ledger calls), per run, one project, ledger ingest included",
    u.seam,
    "oneProject",
  );
  seamRow(
    "the same, runs of 50 projects (one queue send per batch; the consumer's ledger calls are not the run's)",
    u.seam,
    "fiftyProjects",
  );
  seamRow(
    "the seam with a ledger that keeps nothing: the run's own side of recording, one project (budget +0.03 ms)",
    u.runSide,
    "oneProject",
  );
  seamRow("the same, runs of 50 projects", u.runSide, "fiftyProjects");
  const s = u.ingest.stats;
  if (s)
    console.log(
      `| the busy week's ledger: ${s.records} records, ${s.rollups} minute rollups | ${fmt(s.bytes / 1e6, 1)} MB = ${fmt(s.bytes / s.records, 0)} bytes a record, rollups included |`,
    );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const options = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=")));
  const { mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir, cpus } = await import("node:os");
  ensureWrk();
  const workdir = mkdtempSync(join(tmpdir(), "edge-gateway-bench-usage-"));
  const upstream = await startPeer();
  try {
    const log = (...args) => console.error("bench:", ...args);
    log("building the Worker bundle");
    const bundle = buildBundle(join(workdir, "dist"));
    const figures = await benchUsage({
      bundle,
      upstreamUrl: upstream.url,
      seconds: Number(options.seconds ?? 3),
      reps: Number(options.reps ?? 5),
      wrkCpu: undefined,
      log,
    });
    if (figures) printUsage(figures, (n, digits = 2) => n.toFixed(digits));
    printSummary();
    console.log(`\nmachine: ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}), ${new Date().toISOString()}`);
  } finally {
    await upstream.close();
    rmSync(workdir, { recursive: true, force: true });
  }
}
