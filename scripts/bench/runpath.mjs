// The run path against the runtime's own limit, every figure a ratio (or difference) to the bare
// pass-through Worker measured in the same repetition, and what each remaining cost of the run path
// is, measured alone: the same bundle with one piece taken out (a binding left unbound, or one
// function of the built bundle made a no-op), side by side with the bundle as it is.
//
// `npm run bench` runs it as its section `runcost`; alone, for quick checks while developing:
//   node scripts/bench/runpath.mjs --seconds=1 --reps=1 [--mib=100] [--samples=100] [--variants=none|<id>,<id>]
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, createServer } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { cpuReader } from "./cpu.mjs";
import { buildBundle, managementApi, SECRETS, startGateway, startPassthrough } from "./gateway.mjs";
import { listenOnLoopback } from "./peers.mjs";
import { timedGet, writeBytes } from "./streaming.mjs";
import { ensureWrk, wrk } from "./wrk.mjs";

const MIB = 1024 * 1024;
const JSON_BODY = JSON.stringify({ message: "hello from the bench upstream", value: 42 });
const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.alloc(16 * 1024 - 8, 0x42),
]);
// The rate limit as wrangler.toml binds it, with a limit no benchmark reaches: its call is measured, never its 429.
const RUN_LIMITER = { RATE_LIMIT_RUNS: { namespace_id: "1003", simple: { limit: 1_000_000_000, period: 60 } } };

/**
 * The app, by the path's last segment: `run` (a small JSON answer with its length), `png` (16 KiB of
 * image/png with its length), `file?mib=N` (N MiB of octet-stream with its length), `bytes?mib=N` (the
 * same, chunked, no length), `sse` (an event stream: its first event at once, the rest 20 ms later).
 */
async function startApp() {
  const server = createServer((req, res) => {
    req.resume();
    const url = new URL(req.url, "http://app");
    const last = url.pathname.slice(url.pathname.lastIndexOf("/") + 1);
    if (last === "run")
      return void res
        .writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(JSON_BODY) })
        .end(JSON_BODY);
    if (last === "png")
      return void res.writeHead(200, { "Content-Type": "image/png", "Content-Length": PNG.length }).end(PNG);
    if (last === "sse") {
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      res.write('data: {"token":"first"}\n\n');
      setTimeout(() => res.end('data: {"token":"second"}\n\nevent: done\ndata: {}\n\n'), 20);
      return;
    }
    if (last === "file" || last === "bytes") {
      const bytes = Number(url.searchParams.get("mib") ?? "1") * MIB;
      res.writeHead(200, {
        "Content-Type": "application/octet-stream",
        ...(last === "file" ? { "Content-Length": bytes } : {}),
      });
      return writeBytes(res, bytes);
    }
    res.writeHead(404).end();
  });
  server.keepAliveTimeout = 60_000;
  const url = await listenOnLoopback(server);
  return { url, close: () => new Promise((r) => (server.closeAllConnections(), server.close(r))) };
}

/** A project, a key, a `cortex` app and a `custom` app, both deployed at `appUrl`, made through the gateway's API. */
async function seed(gatewayUrl, appUrl) {
  const call = managementApi(gatewayUrl);
  const { project_id } = await call(SECRETS.ADMIN_TOKEN, "POST", "/projects", { name: "runpath" });
  const expires_at = new Date(Date.now() + 24 * 3600 * 1000).toISOString();
  const { token } = await call(SECRETS.ADMIN_TOKEN, "POST", `/projects/${project_id}/service-accounts`, {
    name: "bench",
    expires_at,
  });
  for (const [name, runtime] of [
    ["fn", "cortex"],
    ["srv", "custom"],
  ]) {
    const apps = `/projects/${project_id}/apps`;
    const { app_id } = await call(token, "POST", apps, { name, region: "us-east-1", runtime });
    const { build_id } = await call(token, "POST", `${apps}/${app_id}/builds`);
    await call(token, "PATCH", `${apps}/${app_id}/builds/${build_id}`, { status: "building" });
    await call(token, "PATCH", `${apps}/${app_id}/builds/${build_id}`, { status: "succeeded", origin_url: appUrl });
  }
  return { headers: { Authorization: `Bearer ${token}` }, fn: `/v4/${project_id}/fn`, srv: `/v4/${project_id}/srv` };
}

/**
 * The pieces of the run path measured alone: each a copy of the gateway with that piece taken out
 * (`patch` rewrites the built bundle, making a function a no-op; when it does not match, the piece is
 * reported as not measured) or, for the rate limiter, put in: the gateway as built runs with the
 * bindings the rest of the bench gives it, which leave `RATE_LIMIT_RUNS` unbound (the run then skips
 * the limiter); `limiter: true` binds Miniflare's local stand-in of it.
 */
export const VARIANTS = [
  {
    id: "router-skip",
    buys: "runs skip Hono's router (its context, middleware chain, route match); the variant routes the same runs through Hono, so a saving shows as a negative cost",
    patch: [
      /(function createAsyncRunRouter\(\) \{\n {2}return createRouter\(\))([\s\S]*?)return (\w+) \? (\w+)\(scope, (\w+), checkedTarget\(target\)\) : (\w+)\.fetch\(\5, env, ctx\);/,
      '$1.all("/:project_id/:app_name/:path{.+}", (c) => $4(c.var.scope, c.req.raw, checkedTarget(pathTarget(new URL(c.req.url).pathname))))$2return $6.fetch($5, env, ctx);',
    ],
  },
  {
    id: "rate-limit",
    buys: "per-project back-pressure (429 with Retry-After): Miniflare's local stand-in of the binding",
    limiter: true,
  },
  {
    id: "log-line",
    buys: "one structured line per request (route, status, duration, ids)",
    patch: [/function logRequest\(fields\) \{\n/, "function logRequest(fields) {\n  return;\n"],
  },
  {
    id: "log-context",
    buys: "every line of a request carries its request id (AsyncLocalStorage around the request)",
    patch: [/\(fields, work\) => invocation\.run\(fields, work\)/, "(fields, work) => work()"],
  },
  {
    id: "header-policy",
    buys: "the header policy both ways (credentials and forwarding claims dropped, X-Forwarded-* stated, the app's headers that would act on the shared hostname dropped, nosniff and the sandbox added)",
    patch: [
      /function upstreamHeaders\((\w+), (\w+), keepUpgrade = false\) \{\n([\s\S]*?)\nfunction passedBackHeaders\((\w+), (\w+)\) \{\n/,
      'function upstreamHeaders($1, $2, keepUpgrade = false) {\n  return new Headers({ "x-run-id": $2 });\n$3\nfunction passedBackHeaders($4, $5) {\n  return new Headers({ "content-type": $4.get("content-type") ?? "application/octet-stream", "x-run-id": $5 });\n',
    ],
  },
  {
    id: "usage-record",
    buys: "the run's usage record (taken at its end, sent in waitUntil)",
    patch: [/function recordRun\((\w+), (\w+)\) \{\n/, "function recordRun($1, $2) {\n  return;\n"],
  },
];

const median = (values) => {
  const sorted = [...values].filter((v) => v !== null && Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** wrk at 16 connections on `url`: req/s, p99 and the serving workerd's CPU per request. */
async function load(target, path, seconds, wrkCpu) {
  const before = target.cpu?.();
  const result = await wrk({
    url: `${target.url}${path}`,
    headers: target.headers,
    connections: 16,
    seconds,
    cpu: wrkCpu,
  });
  const cpu = target.cpu ? (target.cpu() - before) / (result.rps * seconds) : null;
  return { rps: result.rps, p99: result.p99, cpu, bad: result.non2xx };
}

/**
 * Builds nothing itself: `bundle` is the built gateway (`buildBundle`). Starts the app, the bare
 * Worker in front of it, the gateway as built and one gateway per variant; then per repetition, each
 * target in turn: the JSON run and the binary answer under wrk, a `mib` MiB body with and without a
 * declared length, and `samples` event streams' first bytes (paired with the bare Worker's).
 */
export async function benchRunPath({
  bundle,
  seconds,
  reps,
  mib,
  samples,
  wrkCpu,
  variants = VARIANTS,
  log = () => undefined,
}) {
  const cleanup = [];
  const workdir = mkdtempSync(join(tmpdir(), "runpath-bench-"));
  try {
    const app = await startApp();
    cleanup.push(app.close);
    const bare = await startPassthrough(app.url);
    cleanup.push(() => bare.mf.dispose());
    const source = readFileSync(bundle, "utf8");
    const start = async (id, script, limiter) => {
      // Its log lines are written (their cost is the run's) and dropped here, not printed by the bench.
      const gw = await startGateway(script, {
        workerOptions: limiter ? { ratelimits: RUN_LIMITER } : {},
        sharedOptions: { handleStructuredLogs: () => undefined },
      });
      cleanup.push(() => gw.mf.dispose());
      const s = await seed(gw.url, app.url);
      return { id, url: gw.url, headers: s.headers, fn: s.fn, srv: s.srv, cpu: cpuReader(gw.url) };
    };
    const gateway = await start("as built", bundle, false);
    const barePaths = {
      url: bare.url,
      headers: {},
      fn: gateway.fn,
      srv: gateway.srv,
      cpu: cpuReader(bare.url),
      id: "bare",
    };
    const alone = [];
    for (const variant of variants) {
      let script = bundle;
      if (variant.patch) {
        const [pattern, replacement] = variant.patch;
        if (!pattern.test(source)) {
          alone.push({ ...variant, missing: true });
          continue;
        }
        script = join(workdir, `${variant.id}.js`);
        // The bundle is one module (`wrangler deploy --dry-run` writes index.js alone).
        writeFileSync(script, source.replace(pattern, replacement));
      }
      alone.push({ ...variant, target: await start(variant.id, script, variant.limiter === true) });
    }
    const targets = [barePaths, gateway, ...alone.filter((v) => v.target).map((v) => v.target)];
    for (const t of targets) {
      for (const path of [`${t.fn}/run`, `${t.srv}/png`, `${t.srv}/sse`]) {
        const check = await fetch(`${t.url}${path}`, { headers: t.headers });
        if (check.status !== 200) throw new Error(`${t.id} ${path}: ${check.status} ${await check.text()}`);
        await check.arrayBuffer();
      }
      t.agent = new Agent({ keepAlive: true, maxSockets: 1 });
      // One unrecorded second each: JIT and connection pools warm alike.
      await wrk({ url: `${t.url}${t.fn}/run`, headers: t.headers, connections: 16, seconds: 1, cpu: wrkCpu });
    }
    const perRep = [];
    for (let rep = 1; rep <= reps; rep++) {
      const figures = {};
      // Alternate the order: a target measured first in one rep is measured last in the next.
      for (const t of rep % 2 ? targets : [...targets].reverse()) {
        log(`run path rep ${rep}/${reps}: ${t.id}`);
        const json = await load(t, `${t.fn}/run`, seconds, wrkCpu);
        const png = await load(t, `${t.srv}/png`, seconds, wrkCpu);
        figures[t.id] = { json, png };
        if (t.id === "bare" || t.id === "as built") {
          const declared = await timedGet(`${t.url}${t.srv}/file?mib=${mib}`, t.headers, t.agent);
          const chunked = await timedGet(`${t.url}${t.srv}/bytes?mib=${mib}`, t.headers, t.agent);
          for (const body of [declared, chunked])
            if (body.bytes !== mib * MIB) throw new Error(`${t.id}: ${body.bytes} of ${mib * MIB} bytes`);
          figures[t.id].declared = declared.bytes / (declared.total / 1000);
          figures[t.id].chunked = chunked.bytes / (chunked.total / 1000);
        }
      }
      // First bytes in back-to-back pairs (order alternating), so each difference cancels the machine's drift.
      const firsts = [];
      for (let i = 0; i < samples; i++) {
        const pair = {};
        for (const t of i % 2 ? [barePaths, gateway] : [gateway, barePaths])
          pair[t.id] = (await timedGet(`${t.url}${t.srv}/sse`, t.headers, t.agent)).first;
        firsts.push(pair["as built"] - pair.bare);
      }
      figures.firstByte = median(firsts);
      perRep.push(figures);
    }
    for (const t of targets) t.agent.destroy();
    return {
      seconds,
      reps,
      mib,
      samples,
      perRep,
      variants: alone.map(({ target, ...v }) => ({ ...v, built: Boolean(target) })),
    };
  } finally {
    for (const close of cleanup.reverse()) await close();
    rmSync(workdir, { recursive: true, force: true });
  }
}

/** The table of the run path's figures against their targets, and the itemized costs. */
export function printRunPath(figures, fmt = (n, d = 2) => (n === null ? "–" : n.toFixed(d))) {
  const { perRep } = figures;
  const across = (pick) => median(perRep.map(pick));
  const bad = perRep.reduce(
    (n, r) => n + Object.values(r).reduce((m, f) => m + (f?.json?.bad ?? 0) + (f?.png?.bad ?? 0), 0),
    0,
  );
  console.log(
    `\n## Run path against the bare Worker (wrk, 16 connections, ${figures.seconds} s each; medians of ${figures.reps} reps, each ratio taken within its rep)\n`,
  );
  console.log("| figure | gateway | bare Worker | gateway vs bare | target |");
  console.log("|---|---:|---:|---:|---|");
  const g = (r) => r["as built"];
  const b = (r) => r.bare;
  const mibs = (v) => (v === null ? "–" : `${fmt(v / MIB, 0)} MiB/s`);
  console.log(
    `| (c) run on the API hostname (cortex, envelope), req/s | ${fmt(
      across((r) => g(r).json.rps),
      0,
    )} | ${fmt(
      across((r) => b(r).json.rps),
      0,
    )} | **${fmt(across((r) => g(r).json.rps / b(r).json.rps))}×** | ≥ 0.85× |`,
  );
  console.log(
    `| (c) workerd CPU per run | ${fmt(
      across((r) => g(r).json.cpu),
      3,
    )} ms | ${fmt(
      across((r) => b(r).json.cpu),
      3,
    )} ms | **+${fmt(
      across((r) => g(r).json.cpu - b(r).json.cpu),
      3,
    )} ms** | ≤ +0.12 ms |`,
  );
  console.log(
    `| (c) p99 latency at 16 connections | ${fmt(
      across((r) => g(r).json.p99),
      1,
    )} ms | ${fmt(
      across((r) => b(r).json.p99),
      1,
    )} ms | **${fmt(across((r) => g(r).json.p99 / b(r).json.p99))}×** | ≤ 1.5× |`,
  );
  console.log(
    `| binary answer (16 KiB image/png, custom app), req/s | ${fmt(
      across((r) => g(r).png.rps),
      0,
    )} | ${fmt(
      across((r) => b(r).png.rps),
      0,
    )} | **${fmt(across((r) => g(r).png.rps / b(r).png.rps))}×** | ≥ 0.90× |`,
  );
  console.log(
    `| ${figures.mib} MiB body with its length, bytes/s (the runtime's pipe) | ${mibs(across((r) => g(r).declared))} | ${mibs(across((r) => b(r).declared))} | **${fmt(across((r) => g(r).declared / b(r).declared))}×** | ≥ 0.90× |`,
  );
  console.log(
    `| ${figures.mib} MiB body chunked, no length, bytes/s (watched for silence) | ${mibs(across((r) => g(r).chunked))} | ${mibs(across((r) => b(r).chunked))} | **${fmt(across((r) => g(r).chunked / b(r).chunked))}×** | (≥ 0.90×) |`,
  );
  console.log(
    `| event stream, first byte (median of ${figures.samples} back-to-back pairs per rep) | | | **+${fmt(
      across((r) => r.firstByte),
      3,
    )} ms** | ≤ +1 ms |`,
  );
  if (bad) console.log(`\nnon-2xx answers under load: ${bad}`);
  if (figures.variants.length === 0) return;
  console.log(
    "\n### What each remaining cost buys, measured alone (the same bundle with that piece taken out, or the limiter put in, in the same reps)\n",
  );
  console.log(
    "| piece | what it buys | CPU per run it costs (JSON run; binary answer) | req/s with it ÷ without | p99 at 16 with ÷ without | binary req/s with ÷ without |",
  );
  console.log("|---|---|---:|---:|---:|---:|");
  // A piece put in (the limiter) costs what it adds; a piece taken out, what its absence saves.
  const with_ = (v, r) => (v.limiter ? r[v.id] : g(r));
  const without = (v, r) => (v.limiter ? g(r) : r[v.id]);
  for (const v of figures.variants) {
    if (!v.built) {
      console.log(`| ${v.id} | ${v.buys} | not measured: its code was not found in the bundle | | |`);
      continue;
    }
    const cost = (kind) => across((r) => with_(v, r)[kind].cpu - without(v, r)[kind].cpu);
    const ratio = (kind, key) => fmt(across((r) => with_(v, r)[kind][key] / without(v, r)[kind][key]));
    console.log(
      `| ${v.id} | ${v.buys} | ${fmt(cost("json"), 3)} ms; ${fmt(cost("png"), 3)} ms | ${ratio("json", "rps")}× | ${ratio("json", "p99")}× | ${ratio("png", "rps")}× |`,
    );
  }
}

// Alone: build, pin (servers on CPU 0, wrk on CPU 1), measure, print.
if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=")));
  const hasTaskset = spawnSync("taskset", ["-c", "0", "true"]).status === 0;
  if (hasTaskset && !process.env.BENCH_PINNED) {
    const child = spawnSync("taskset", ["-c", "0", process.execPath, ...process.argv.slice(1)], {
      stdio: "inherit",
      env: { ...process.env, BENCH_PINNED: "1" },
    });
    process.exit(child.status ?? 1);
  }
  ensureWrk();
  const dir = mkdtempSync(join(tmpdir(), "runpath-build-"));
  try {
    console.error("bench: building the Worker bundle");
    const figures = await benchRunPath({
      bundle: buildBundle(join(dir, "dist")),
      seconds: Number(options.seconds ?? 3),
      reps: Number(options.reps ?? 3),
      mib: Number(options.mib ?? 100),
      samples: Number(options.samples ?? 100),
      wrkCpu: hasTaskset ? 1 : undefined,
      variants:
        options.variants === "none"
          ? []
          : options.variants
            ? VARIANTS.filter((v) => options.variants.split(",").includes(v.id))
            : VARIANTS,
      log: (...args) => console.error("bench:", ...args),
    });
    printRunPath(figures);
    console.log(
      `\nmachine: ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}), ${new Date().toISOString()}, servers on CPU 0 and wrk on CPU 1: ${hasTaskset}.`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
