// The run path's answers and bodies against the runtime's own limit, every figure a ratio (or
// difference) to the bare pass-through Worker (b) and to (b') = (b) plus one call of the run's
// rate-limit binding, measured in the same repetition: a binary answer, a large body with and without
// a declared length (bytes/s, CPU per GiB, memory), an event stream's first byte. Then what each
// remaining cost of the run path is, measured alone: the same bundle with one piece taken out (a
// binding left unbound, or one function of the built bundle made a no-op) or put in, side by side
// with the bundle as it is.
//
// `npm run bench` runs it as its section `runcost`; alone, for quick checks while developing:
//   node scripts/bench/runpath.mjs --seconds=1 --reps=1 [--mib=100] [--samples=30] [--variants=none|<id>,<id>]
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, createServer } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { cpuReader } from "./cpu.mjs";
import { buildBundle, managementApi, SECRETS, startGateway, startPassthrough } from "./gateway.mjs";
import { noiseLine, noiseMeter } from "./noise.mjs";
import { listenOnLoopback } from "./peers.mjs";
import { cost, figure, keep, median, printRows, printSummary } from "./report.mjs";
import { rssReader, timedGet, writeBytes } from "./streaming.mjs";
import { ensureWrk, wrk } from "./wrk.mjs";

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;
const JSON_BODY = JSON.stringify({ message: "hello from the bench upstream", value: 42 });
const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.alloc(16 * 1024 - 8, 0x42),
]);

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
 * reported as not measured; `orPatch` is tried when `patch` does not match; `unbind` leaves the rate limiters unbound, which the run then skips) or,
 * with `putIn`, a piece the gateway as built does not pay put in (the router). A piece's cost is what
 * the copy with it costs more than the copy without it. With `bodies: true` the copy also streams the
 * large bodies, and the piece's cost per GiB and bytes/s are printed.
 */
export const VARIANTS = [
  {
    id: "router",
    putIn: true,
    buys: "Hono's router for runs (its context, middleware chain, route match): the gateway skips it for runs; the variant routes the same runs through it, so its cost is what the skip saves",
    patch: [
      /(function createAsyncRunRouter\(\) \{\n {2}return createRouter\(\))([\s\S]*?)return (\w+) \? (\w+)\(scope, (\w+), checkedTarget\(target\)\) : (\w+)\.fetch\(\5, env, ctx\);/,
      '$1.all("/:project_id/:app_name/:path{.+}", (c) => $4(c.var.scope, c.req.raw, checkedTarget(pathTarget(new URL(c.req.url).pathname))))$2return $6.fetch($5, env, ctx);',
    ],
  },
  {
    id: "rate-limit",
    buys: "per-project back-pressure (429 with Retry-After): one call of RATE_LIMIT_RUNS, Miniflare's local stand-in of the binding; the same call is what (b') adds to (b)",
    unbind: true,
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
      /function appRequestHeaders\((\w+), (\w+), keepUpgrade = false\) \{\n([\s\S]*?)\nfunction passedBackHeaders\((\w+), (\w+)\) \{\n/,
      'function appRequestHeaders($1, $2, keepUpgrade = false) {\n  return new Headers({ "x-run-id": $2 });\n$3\nfunction passedBackHeaders($4, $5) {\n  return new Headers({ "content-type": $4.get("content-type") ?? "application/octet-stream", "x-run-id": $5 });\n',
    ],
  },
  {
    id: "silence-watch",
    bodies: true,
    buys: "a chunked answer's silence watch (RUN_STREAM_IDLE_MS ends a call whose app goes quiet) and its byte count; without it the app's body is handed to the caller as the runtime gives it",
    patch: [
      // The relay (a reused buffer lent to an IdentityTransformStream): stream() hands on the app's body itself.
      /(stream\(\) \{\n\s+if \(\w+\) return null;\n)(\s+const \{ readable, writable \} = new IdentityTransformStream\(\);[\s\S]*?relay\w*\((\w+)\.body)/,
      "$1      return $3.body;\n$2",
    ],
    // The watch before the relay (byob reads in a ReadableStream of its own).
    orPatch: [/function watchSilence\((\w+)[^)]*\) \{\n/, "$&  return $1;\n"],
  },
  {
    id: "usage-record",
    buys: "the run's usage record (taken at its end, sent in waitUntil)",
    patch: [/function recordRun\((\w+), (\w+)\) \{\n/, "function recordRun($1, $2) {\n  return;\n"],
  },
];

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

/** One body through `t`: bytes/s, the serving workerd's CPU per GiB, and its RSS growth (peak − before, sampled every 10 ms). */
async function body(t, path, bytes) {
  const cpuBefore = t.cpu?.();
  const rssBefore = t.rss?.() ?? null;
  let peak = rssBefore;
  const sampler = rssBefore === null ? null : setInterval(() => (peak = Math.max(peak, t.rss())), 10);
  const got = await timedGet(`${t.url}${path}`, t.headers, t.agent);
  if (sampler) clearInterval(sampler);
  if (got.bytes !== bytes) throw new Error(`${t.id} ${path}: ${got.bytes} of ${bytes} bytes`);
  return {
    bytesPerSecond: got.bytes / (got.total / 1000),
    cpuPerGiB: t.cpu ? ((t.cpu() - cpuBefore) * GIB) / got.bytes : null,
    rssGrowth: rssBefore === null ? null : peak - rssBefore,
  };
}

/**
 * Builds nothing itself: `bundle` is the built gateway (`buildBundle`). Starts the app, (b) and (b')
 * in front of it, the gateway as built (its limiters bound, as wrangler.toml binds them) and one
 * gateway per variant; then per repetition, each target in turn (the order alternating): the JSON run
 * and the binary answer under wrk; through (b), (b') and the gateway a `mib` MiB body with and without
 * a declared length; and `samples` event streams' first bytes, taken back to back in triples.
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
    const source = readFileSync(bundle, "utf8");
    const start = async (id, script, unbind) => {
      // Its log lines are written (their cost is the run's) and dropped here, not printed by the bench.
      const gw = await startGateway(script, {
        workerOptions: unbind ? { ratelimits: {} } : {},
        sharedOptions: { handleStructuredLogs: () => undefined },
      });
      cleanup.push(() => gw.mf.dispose());
      const s = await seed(gw.url, app.url);
      return {
        id,
        url: gw.url,
        headers: s.headers,
        fn: s.fn,
        srv: s.srv,
        cpu: cpuReader(gw.url),
        rss: rssReader(gw.url),
      };
    };
    const gateway = await start("as built", bundle, false);
    const floors = [];
    for (const [id, limiter] of [
      ["bare", false],
      ["bare'", true],
    ]) {
      const b = await startPassthrough(app.url, { limiter });
      cleanup.push(() => b.mf.dispose());
      floors.push({
        id,
        url: b.url,
        headers: {},
        fn: gateway.fn,
        srv: gateway.srv,
        cpu: cpuReader(b.url),
        rss: rssReader(b.url),
      });
    }
    // The bare Worker reading the body in JavaScript: streams the large bodies only.
    const readsInJs = await startPassthrough(app.url, { readInJs: true });
    cleanup.push(() => readsInJs.mf.dispose());
    const bareJs = {
      id: "bare-js",
      url: readsInJs.url,
      headers: {},
      fn: gateway.fn,
      srv: gateway.srv,
      cpu: cpuReader(readsInJs.url),
      rss: rssReader(readsInJs.url),
      bodiesOnly: true,
    };
    const alone = [];
    for (const variant of variants) {
      let script = bundle;
      if (variant.patch) {
        const [pattern, replacement] =
          [variant.patch, variant.orPatch].find((p) => p?.[0].test(source)) ?? variant.patch;
        if (!pattern.test(source)) {
          alone.push({ ...variant, missing: true });
          continue;
        }
        script = join(workdir, `${variant.id}.js`);
        // The bundle is one module (`wrangler deploy --dry-run` writes index.js alone).
        writeFileSync(script, source.replace(pattern, replacement));
      }
      alone.push({ ...variant, target: await start(variant.id, script, variant.unbind === true) });
    }
    const streamed = [...floors, gateway];
    // Variants that change how a body streams (`bodies: true`) stream the large bodies too.
    const bodied = new Set(alone.filter((v) => v.target && v.bodies).map((v) => v.id));
    const targets = [...streamed, bareJs, ...alone.filter((v) => v.target).map((v) => v.target)];
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
      const stop = noiseMeter();
      // Alternate the order: a target measured first in one rep is measured last in the next.
      for (const t of rep % 2 ? targets : [...targets].reverse()) {
        log(`run path rep ${rep}/${reps}: ${t.id}`);
        const json = t.bodiesOnly ? null : await load(t, `${t.fn}/run`, seconds, wrkCpu);
        const png = t.bodiesOnly ? null : await load(t, `${t.srv}/png`, seconds, wrkCpu);
        figures[t.id] = { json, png };
        if (t.id === "bare" || t === gateway || t.bodiesOnly || bodied.has(t.id)) {
          figures[t.id].declared = await body(t, `${t.srv}/file?mib=${mib}`, mib * MIB);
          figures[t.id].chunked = await body(t, `${t.srv}/bytes?mib=${mib}`, mib * MIB);
        }
      }
      // First bytes in back-to-back triples (order rotating), so each difference cancels the machine's drift.
      const firsts = { bare: [], "bare'": [] };
      for (let i = 0; i < samples; i++) {
        const triple = {};
        const order = [...streamed.slice(i % 3), ...streamed.slice(0, i % 3)];
        for (const t of order) triple[t.id] = (await timedGet(`${t.url}${t.srv}/sse`, t.headers, t.agent)).first;
        for (const id of Object.keys(firsts)) firsts[id].push(triple["as built"] - triple[id]);
      }
      figures.firstByte = { bare: median(firsts.bare), "bare'": median(firsts["bare'"]) };
      figures.noise = stop();
      log(`   ${noiseLine(figures.noise)}`);
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

/** The rows of the run path's answers and bodies against their targets, and the itemized costs. */
export function printRunPath(figures) {
  const { perRep, mib } = figures;
  const each = (pick) => perRep.map(pick);
  const g = (r) => r["as built"];
  const rows = [
    figure(
      "binary answer (16 KiB image/png, custom app), req/s",
      each((r) => g(r).png.rps / r["bare'"].png.rps),
      {
        unit: "x",
        key: "binary",
        target: [">=", 0.9],
        vs: "(b')",
      },
    ),
    figure(
      "binary answer, req/s",
      each((r) => g(r).png.rps / r.bare.png.rps),
      { unit: "x", vs: "(b)" },
    ),
    figure(
      "binary answer, workerd CPU per run",
      each((r) => g(r).png.cpu - r["bare'"].png.cpu),
      {
        unit: "ms",
        digits: 3,
        signed: true,
        cost: true,
        vs: "(b')",
      },
    ),
    figure(
      "JSON run (cortex, envelope) in this section's app, req/s",
      each((r) => g(r).json.rps / r["bare'"].json.rps),
      {
        unit: "x",
        vs: "(b')",
        note: "(the targets are section 1's)",
      },
    ),
    figure(
      `${mib} MiB chunked, no length (watched for silence), bytes/s`,
      each((r) => g(r).chunked.bytesPerSecond / r.bare.chunked.bytesPerSecond),
      {
        unit: "x",
        key: "chunked",
        target: [">=", 0.9],
        vs: "(b)",
      },
    ),
    figure(
      `${mib} MiB chunked, workerd CPU per GiB streamed: gateway ÷ bare`,
      each((r) => g(r).chunked.cpuPerGiB / r.bare.chunked.cpuPerGiB),
      {
        unit: "x",
        key: "chunked-cpu",
        target: ["<=", 1.2],
        vs: "(b)",
      },
    ),
    figure(
      `${mib} MiB chunked, gateway's CPU per GiB`,
      each((r) => g(r).chunked.cpuPerGiB),
      { unit: "ms/GiB", digits: 0 },
    ),
    figure(
      `${mib} MiB chunked, bare Worker's CPU per GiB`,
      each((r) => r.bare.chunked.cpuPerGiB),
      { unit: "ms/GiB", digits: 0 },
    ),
    figure(
      `${mib} MiB chunked through the bare Worker reading it in JavaScript (byob reads, no watch), CPU per GiB ÷ bare`,
      each((r) => r["bare-js"]?.chunked.cpuPerGiB / r.bare.chunked.cpuPerGiB),
      { unit: "x", key: "chunked-runtime-cpu", vs: "(b)" },
    ),
    figure(
      `${mib} MiB chunked through the bare Worker reading it in JavaScript, bytes/s ÷ bare`,
      each((r) => r["bare-js"]?.chunked.bytesPerSecond / r.bare.chunked.bytesPerSecond),
      { unit: "x", key: "chunked-runtime", vs: "(b)" },
    ),
    figure(
      `workerd RSS growth while ${mib} MiB chunked streams through the gateway`,
      each((r) => g(r).chunked.rssGrowth / MIB),
      {
        unit: "MiB",
        digits: 1,
        key: "rss",
        target: ["<=", 32],
      },
    ),
    figure(
      `workerd RSS growth, the same through the bare Worker`,
      each((r) => r.bare.chunked.rssGrowth / MIB),
      { unit: "MiB", digits: 1 },
    ),
    figure(
      `${mib} MiB with its length, bytes/s (the runtime's pipe)`,
      each((r) => g(r).declared.bytesPerSecond / r.bare.declared.bytesPerSecond),
      {
        unit: "x",
        key: "declared",
        target: [">=", 0.9],
        vs: "(b)",
      },
    ),
    figure(
      `${mib} MiB with its length, CPU per GiB: gateway ÷ bare`,
      each((r) => g(r).declared.cpuPerGiB / r.bare.declared.cpuPerGiB),
      {
        unit: "x",
        key: "declared-cpu",
        target: ["<=", 1.2],
        vs: "(b)",
      },
    ),
    figure(
      `event stream, first byte (median of ${figures.samples} back-to-back triples per rep)`,
      each((r) => r.firstByte["bare'"]),
      {
        unit: "ms",
        digits: 3,
        signed: true,
        cost: true,
        key: "first-byte-bprime",
        target: ["<=", 1],
        vs: "(b')",
      },
    ),
    figure(
      "event stream, first byte",
      each((r) => r.firstByte.bare),
      {
        unit: "ms",
        digits: 3,
        signed: true,
        cost: true,
        vs: "(b)",
        // The target is against (b'): against (b) the local limiter's stand-in (a Durable Object's SQLite
        // write per call) is in the difference, which production does not pay in that form.
        note: "(the local limiter's stand-in included)",
      },
    ),
  ];
  printRows(
    `## 8. The run path's answers and bodies (wrk, 16 connections, ${figures.seconds} s each; ${figures.reps} reps, each ratio taken within its rep)`,
    rows,
    { section: "8. run path bodies" },
  );
  const bad = perRep.reduce(
    (n, r) => n + Object.values(r).reduce((m, f) => m + (f?.json?.bad ?? 0) + (f?.png?.bad ?? 0), 0),
    0,
  );
  if (bad) console.log(`\nnon-2xx answers under load: ${bad}`);
  console.log(
    `\nNoise per rep (other processes' CPU while the rep ran, share of one core): ${perRep.map((r) => (r.noise ? r.noise.othersShare.toFixed(2) : "–")).join(", ")}.`,
  );
  if (figures.variants.length === 0) return;
  console.log(
    `\n### What each remaining cost buys, measured alone (the same bundle with that piece taken out, or put in; in the same ${figures.reps} reps)\n`,
  );
  console.log(
    "| piece | what it buys | CPU per JSON run it costs | CPU per binary answer | req/s with it ÷ without (JSON) | binary req/s with ÷ without |",
  );
  console.log("|---|---|---:|---:|---:|---:|");
  const ratio = (vs, d = 2) => {
    const m = median(vs);
    return m === null ? "–" : `${m.toFixed(d)}× (${Math.min(...vs).toFixed(d)}…${Math.max(...vs).toFixed(d)})`;
  };
  for (const v of figures.variants) {
    if (!v.built) {
      console.log(`| ${v.id} | ${v.buys} | not measured: its code was not found in the bundle | | | |`);
      continue;
    }
    const withIt = (r) => (v.putIn ? r[v.id] : g(r));
    const without = (r) => (v.putIn ? g(r) : r[v.id]);
    const pick = (kind, key) => [each((r) => withIt(r)[kind][key]), each((r) => without(r)[kind][key])];
    keep("piece", {
      id: v.id,
      buys: v.buys,
      json: cost(...pick("json", "cpu")),
      png: cost(...pick("png", "cpu")),
      rps: ratio(each((r) => withIt(r).json.rps / without(r).json.rps)),
      pngRps: ratio(each((r) => withIt(r).png.rps / without(r).png.rps)),
    });
    console.log(
      `| ${v.id} | ${v.buys} | ${cost(...pick("json", "cpu"))} | ${cost(...pick("png", "cpu"))} | ${ratio(each((r) => withIt(r).json.rps / without(r).json.rps))} | ${ratio(each((r) => withIt(r).png.rps / without(r).png.rps))} |`,
    );
  }
  const bodied = figures.variants.filter((v) => v.built && v.bodies);
  if (bodied.length === 0) return;
  console.log(
    `\n| piece | ${mib} MiB chunked: CPU per GiB it costs | bytes/s with it ÷ without | RSS growth with it; without |`,
  );
  console.log("|---|---:|---:|---|");
  for (const v of bodied) {
    const withIt = (r) => (v.putIn ? r[v.id] : g(r));
    const without = (r) => (v.putIn ? g(r) : r[v.id]);
    const mibs = (pick) => `${median(each(pick)).toFixed(1)} MiB`;
    keep("piece-bodies", {
      id: v.id,
      cpuPerGiB: cost(
        each((r) => withIt(r).chunked.cpuPerGiB),
        each((r) => without(r).chunked.cpuPerGiB),
        { unit: "ms", digits: 0 },
      ),
      bytesPerSecond: ratio(each((r) => withIt(r).chunked.bytesPerSecond / without(r).chunked.bytesPerSecond)),
    });
    console.log(
      `| ${v.id} | ${cost(
        each((r) => withIt(r).chunked.cpuPerGiB),
        each((r) => without(r).chunked.cpuPerGiB),
        { unit: "ms", digits: 0 },
      )} | ${ratio(each((r) => withIt(r).chunked.bytesPerSecond / without(r).chunked.bytesPerSecond))} | ${mibs((r) => withIt(r).chunked.rssGrowth / MIB)}; ${mibs((r) => without(r).chunked.rssGrowth / MIB)} |`,
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
      samples: Number(options.samples ?? 30),
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
    printSummary();
    console.log(
      `\nmachine: ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}), ${new Date().toISOString()}, servers on CPU 0 and wrk on CPU 1: ${hasTaskset}.`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
