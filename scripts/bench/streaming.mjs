// Streaming through the gateway against the bare pass-through Worker streaming the same from the same
// peer, side by side in one run: time to the first byte of an event stream, bytes/s and workerd's
// memory while a large body streams, and req/s of a binary answer. The app is a `custom` app, so every
// answer passes through as the peer gave it.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent, createServer, request } from "node:http";
import { listenOnLoopback } from "./peers.mjs";

const MIB = 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);
// The event stream's first event goes at once; the rest after this pause, so the first byte is timed
// on its own and not with the end of the answer.
const REST_AFTER_MS = 20;
// A binary answer of the size of a small generated image.
const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.alloc(16 * 1024 - 8, 0x42),
]);

/**
 * The app: by the path's last segment, `sse` (an event stream, first event at once), `bytes?mib=N`
 * (N MiB of application/octet-stream, chunked, written as fast as the reader takes it), `png` (16 KiB
 * of image/png). Matching on the last segment lets the bare Worker forward the gateway's path as it is.
 */
/** Writes `bytes` bytes of filler to `res` in 64 KiB chunks, at the pace the connection drains, then ends it. */
export function writeBytes(res, bytes) {
  let left = bytes;
  const write = () => {
    while (left > 0) {
      const chunk = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
      left -= chunk.length;
      if (!res.write(chunk)) return void res.once("drain", write);
    }
    res.end();
  };
  write();
}

export async function startStreamPeer() {
  const server = createServer((req, res) => {
    req.resume();
    const url = new URL(req.url, "http://peer");
    const last = url.pathname.slice(url.pathname.lastIndexOf("/") + 1);
    if (last === "sse") {
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      res.write('data: {"token":"first"}\n\n');
      setTimeout(
        () => res.end('data: {"token":"second"}\n\ndata: {"token":"third"}\n\nevent: done\ndata: {}\n\n'),
        REST_AFTER_MS,
      );
      return;
    }
    if (last === "bytes") {
      res.writeHead(200, { "Content-Type": "application/octet-stream" });
      writeBytes(res, Number(url.searchParams.get("mib") ?? "1") * MIB);
      return;
    }
    if (last === "png") {
      res.writeHead(200, { "Content-Type": "image/png", "Content-Length": PNG.length });
      res.end(PNG);
      return;
    }
    res.writeHead(404).end();
  });
  server.keepAliveTimeout = 60_000;
  const url = await listenOnLoopback(server);
  return { url, close: () => new Promise((r) => (server.closeAllConnections(), server.close(r))) };
}

/** VmRSS (bytes) of the process listening at `url` (workerd), or null where /proc and ss are not there. */
export function rssReader(url) {
  try {
    const pid = /pid=(\d+)/.exec(execFileSync("ss", ["-ltnpH", `sport = :${new URL(url).port}`]).toString())?.[1];
    if (!pid) return null;
    return () => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
  } catch {
    return null;
  }
}

/** GET `url`; resolves with ms to the response's first body byte, ms to its end, and bytes read. */
export function timedGet(url, headers, agent, onChunk) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let first = null;
    let bytes = 0;
    const req = request(url, { headers, agent }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return reject(new Error(`${url}: status ${res.statusCode}`));
      }
      res.on("data", (chunk) => {
        first ??= performance.now() - started;
        bytes += chunk.length;
        onChunk?.();
      });
      res.on("end", () => resolve({ first, total: performance.now() - started, bytes }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/**
 * `gateway` and `bare`: {url, headers} of the same app path prefix (`…/{app}`) through each. `samples`
 * first-byte timings each (interleaved, one kept-alive connection each), then per repetition one `mib`
 * MiB body through each (workerd's RSS sampled every 10 ms while it streams) and `seconds` of wrk on the
 * binary answer each.
 */
export async function benchStreaming({ gateway, bare, samples, mib, reps, seconds, wrk, wrkCpu, log }) {
  const targets = { gateway, bare };
  for (const [name, t] of Object.entries(targets)) {
    t.agent = new Agent({ keepAlive: true, maxSockets: 1 });
    t.rss = rssReader(t.url);
    const check = await fetch(`${t.url}/sse`, { headers: t.headers });
    const body = await check.text();
    if (check.status !== 200 || !check.headers.get("content-type")?.startsWith("text/event-stream")) {
      return {
        skipped: `${name} answered ${check.status} ${check.headers.get("content-type")} (${body.slice(0, 200)})`,
      };
    }
  }
  log(`streaming: time to first byte, ${samples} event streams each`);
  // Pairs taken back to back (order alternating): the difference within a pair cancels the machine's drift.
  const first = { gateway: [], bare: [] };
  for (let i = 0; i < samples; i++) {
    for (const name of i % 2 ? ["bare", "gateway"] : ["gateway", "bare"]) {
      first[name].push((await timedGet(`${targets[name].url}/sse`, targets[name].headers, targets[name].agent)).first);
    }
  }
  const pairedDifference = median(first.gateway.map((g, i) => g - first.bare[i]));
  // One unrecorded second of the binary load on each first: JIT and connection pools warm alike.
  for (const t of Object.values(targets))
    await wrk({ url: `${t.url}/png`, headers: t.headers, connections: 16, seconds: 1, cpu: wrkCpu });
  const perRep = [];
  for (let rep = 1; rep <= reps; rep++) {
    const figures = {};
    for (const name of rep % 2 ? ["gateway", "bare"] : ["bare", "gateway"]) {
      const t = targets[name];
      log(`streaming rep ${rep}/${reps}: ${mib} MiB through the ${name}`);
      const before = t.rss?.() ?? null;
      let peak = before;
      const sampler = before === null ? null : setInterval(() => (peak = Math.max(peak, t.rss())), 10);
      const body = await timedGet(`${t.url}/bytes?mib=${mib}`, t.headers, t.agent);
      if (sampler) clearInterval(sampler);
      if (body.bytes !== mib * MIB) throw new Error(`${name}: ${body.bytes} bytes of ${mib * MIB}`);
      const load = await wrk({ url: `${t.url}/png`, headers: t.headers, connections: 16, seconds, cpu: wrkCpu });
      figures[name] = {
        bytesPerSecond: body.bytes / (body.total / 1000),
        rssGrowth: before === null ? null : peak - before,
        rps: load.rps,
        non2xx: load.non2xx,
      };
    }
    perRep.push(figures);
  }
  for (const t of Object.values(targets)) t.agent.destroy();
  return {
    samples,
    mib,
    firstByte: { gateway: median(first.gateway), bare: median(first.bare), pairedDifference },
    perRep,
  };
}

/** The section's table: ratios and differences taken within a repetition, then their median. */
export function printStreaming(figures, fmt) {
  console.log(
    "\n## 6. Streaming (a custom app's answers passed through; gateway vs the bare pass-through Worker, same peer)\n",
  );
  if (figures.skipped) {
    console.log(`skipped: ${figures.skipped}`);
    return;
  }
  const { firstByte, perRep, mib } = figures;
  const across = (pick) => median(perRep.map(pick));
  const mibs = (v) => fmt(v / MIB, 0);
  const growth = (name) =>
    perRep[0][name].rssGrowth === null ? "–" : `${fmt(across((r) => r[name].rssGrowth) / MIB, 1)} MiB`;
  console.log("| figure | gateway | bare Worker | gateway vs bare | target |");
  console.log("|---|---:|---:|---:|---|");
  console.log(
    `| time to first byte of an event stream, p50 of ${figures.samples} (kept-alive connection) | ${fmt(firstByte.gateway, 3)} ms | ${fmt(firstByte.bare, 3)} ms | **${fmt(firstByte.pairedDifference, 3)} ms** (median of the pairs' differences) | ≤ +1 ms |`,
  );
  console.log(
    `| ${mib} MiB body, bytes/s (median of ${perRep.length}) | ${mibs(across((r) => r.gateway.bytesPerSecond))} MiB/s | ${mibs(across((r) => r.bare.bytesPerSecond))} MiB/s | **${fmt(across((r) => r.gateway.bytesPerSecond / r.bare.bytesPerSecond))}×** | ≥ 0.90× |`,
  );
  console.log(
    `| workerd RSS growth while the ${mib} MiB body streams (peak − before) | **${growth("gateway")}** | ${growth("bare")} | | < 32 MiB |`,
  );
  console.log(
    `| binary answer (16 KiB image/png), req/s at 16 connections | ${fmt(
      across((r) => r.gateway.rps),
      0,
    )} | ${fmt(
      across((r) => r.bare.rps),
      0,
    )} | **${fmt(across((r) => r.gateway.rps / r.bare.rps))}×** | ≥ 0.90× |`,
  );
  const bad = perRep.reduce((n, r) => n + r.gateway.non2xx + r.bare.non2xx, 0);
  if (bad) console.log(`\nnon-2xx answers during the binary load: ${bad}`);
}
