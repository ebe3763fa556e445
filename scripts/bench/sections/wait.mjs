// Runs that outlive their caller, measured where a user feels them: a fast app asked with
// `Prefer: wait=N` against the same run without it (p50 at one connection, workerd CPU at 16), a slow
// app's 202 at N s, and how soon a run's status stream tells its end. Each probed first: a build that
// does not apply `Prefer: wait` or serve the status stream prints "not measured" for that part.
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { listenOnLoopback } from "../peers.mjs";
import { figure, median } from "../report.mjs";

const BODY = JSON.stringify({ message: "hello from the bench upstream", value: 42 });
const WAIT_S = 1;
/** The slow app answers this long after the wait has ended: the 202 is never a race with the answer. */
const SLOW_MS = WAIT_S * 1000 + 1500;
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The app: answers its small JSON body after `?delay=` ms (0 by default); notes when it answered each run. */
async function startApp() {
  const answeredAt = new Map();
  const server = createServer((req, res) => {
    req.resume();
    const delay = Number(new URL(req.url, "http://app").searchParams.get("delay") ?? 0);
    const answer = () => {
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(BODY) }).end(BODY);
      const runId = req.headers["x-run-id"];
      if (runId) answeredAt.set(runId, performance.now());
    };
    if (delay > 0) setTimeout(answer, delay);
    else answer();
  });
  server.keepAliveTimeout = 60_000;
  const url = await listenOnLoopback(server);
  return { url, answeredAt, close: () => new Promise((r) => (server.closeAllConnections(), server.close(r))) };
}

/**
 * Follows `url` as an event stream until an event's run resource is terminal; resolves with when
 * (performance.now()) that event arrived and the events seen, or null when the answer is not a stream.
 */
async function follow(url, headers, maxMs) {
  const response = await fetch(url, {
    headers: { ...headers, Accept: "text/event-stream" },
    signal: AbortSignal.timeout(maxMs),
  });
  if (!response.ok || !response.headers.get("content-type")?.startsWith("text/event-stream")) {
    await response.body?.cancel();
    return null;
  }
  const decoder = new TextDecoder();
  let buffer = "";
  const events = [];
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trim())
        .join("\n");
      if (!data) continue;
      let resource;
      try {
        resource = JSON.parse(data);
      } catch {
        continue;
      }
      events.push(resource.status);
      if (TERMINAL.has(resource.status)) {
        const at = performance.now();
        await response.body.cancel().catch(() => undefined);
        return { at, events };
      }
    }
  }
  return { at: null, events };
}

/**
 * The keeper's "called" write (its SQLite INSERT before the app call, which the output gate makes the
 * call wait for) taken out of the built bundle (src/runs/wait/keeper.ts, `run`).
 */
const UNWRITTEN = [
  /this\.#sql\.exec\("INSERT INTO kept_runs \(run_id, record\) VALUES \(\?, \?\)", [^;]+\);\n(\s+)(this\.#arm\([^;]+\);)/,
  "$2",
];

/** A gateway of the bundle without the keeper's "called" write, with the same app seeded; null when the code is not found. */
async function startUnwritten(ctx, appUrl) {
  const source = readFileSync(ctx.bundle, "utf8");
  if (!UNWRITTEN[0].test(source)) return null;
  const script = join(dirname(ctx.bundle), "unwritten.js");
  writeFileSync(script, source.replace(...UNWRITTEN));
  const gateway = await ctx.startGateway(script);
  const seed = await ctx.seedRunnableApp(gateway.url, appUrl);
  return {
    runUrl: `${gateway.url}${seed.runPath}`,
    headers: { Authorization: `Bearer ${seed.token}`, Prefer: "wait=10" },
    cpu: ctx.cpuReader(gateway.url),
    dispose: () => gateway.mf.dispose(),
  };
}

export default {
  id: "wait",
  title: "9. Runs that outlive their caller: Prefer: wait, the 202 of a slow app, the status stream",
  async run(ctx) {
    const app = await startApp();
    const gateway = await ctx.startGateway(ctx.bundle);
    const rows = [];
    const notes = [];
    let unwritten = null;
    try {
      const seed = await ctx.seedRunnableApp(gateway.url, app.url);
      const headers = { Authorization: `Bearer ${seed.token}` };
      const runUrl = `${gateway.url}${seed.runPath}`;
      const waitHeaders = { ...headers, Prefer: "wait=10" };

      const probe = await fetch(runUrl, { headers: waitHeaders });
      await probe.arrayBuffer();
      const waits = probe.ok && probe.headers.has("preference-applied");
      if (!waits)
        notes.push(`Prefer: wait: not measured: this build answered ${probe.status} without Preference-Applied.`);

      const ownCpu = ctx.cpuReader(gateway.url);
      // The keeper's durable "called" write measured alone: the same bundle without it, beside.
      unwritten = waits ? await startUnwritten(ctx, app.url) : null;
      if (waits && !unwritten)
        notes.push('the keeper\'s "called" write: not measured (its code was not found in the bundle).');
      const kinds = unwritten ? ["sync", "wait", "unwritten"] : ["sync", "wait"];
      const perRep = [];
      if (waits) {
        for (let rep = 1; rep <= ctx.reps; rep++) {
          const figures = {};
          for (const kind of rep % 2 ? kinds : [...kinds].reverse()) {
            ctx.log(`wait rep ${rep}/${ctx.reps}: fast app, ${kind}`);
            const h = kind === "sync" ? headers : kind === "wait" ? waitHeaders : unwritten.headers;
            const url = kind === "unwritten" ? unwritten.runUrl : runUrl;
            const cpu = kind === "unwritten" ? unwritten.cpu : ownCpu;
            const before = cpu?.();
            const load = await ctx.wrk({
              url,
              headers: h,
              connections: 16,
              seconds: ctx.seconds,
              cpu: ctx.wrkCpu,
            });
            const cpuPerRun = cpu ? (cpu() - before) / (load.rps * ctx.seconds) : null;
            const one = await ctx.wrk({
              url,
              headers: h,
              connections: 1,
              seconds: ctx.seconds,
              cpu: ctx.wrkCpu,
            });
            figures[kind] = { p50: one.p50, cpu: cpuPerRun, bad: load.non2xx + one.non2xx };
          }
          // A slow app: the 202 is timed from the request to its headers, three times a rep.
          const lateness = [];
          for (let i = 0; i < 3; i++) {
            const started = performance.now();
            const response = await fetch(`${runUrl}?delay=${SLOW_MS}`, {
              headers: { ...headers, Prefer: `wait=${WAIT_S}` },
            });
            const at = performance.now() - started;
            await response.arrayBuffer();
            if (response.status !== 202)
              throw new Error(`bench wait: a slow app's waited run answered ${response.status}`);
            lateness.push(at - WAIT_S * 1000);
          }
          figures.lateness = lateness;
          perRep.push(figures);
        }
        rows.push(
          figure(
            "fast app, p50 at 1 connection with Prefer: wait=10",
            perRep.map((r) => r.wait.p50 - r.sync.p50),
            {
              unit: "ms",
              digits: 3,
              signed: true,
              cost: true,
              key: "wait-p50",
              target: ["<=", 3],
              vs: "the same run without it",
            },
          ),
          figure(
            "fast app, workerd CPU per run at 16 connections with Prefer: wait=10",
            perRep.map((r) => r.wait.cpu - r.sync.cpu),
            {
              unit: "ms",
              digits: 3,
              signed: true,
              cost: true,
              key: "wait-cpu",
              target: ["<=", 0.3],
              vs: "the same run without it",
            },
          ),
          figure(
            `slow app, Prefer: wait=${WAIT_S}: the 202's distance from ${WAIT_S} s, the worst of 3 per rep`,
            perRep.map((r) => Math.max(...r.lateness.map(Math.abs))),
            { unit: "ms", digits: 0, key: "wait-202", target: ["<=", 250] },
          ),
          figure(
            `slow app: when the 202 came, after ${WAIT_S} s (median of 3 per rep)`,
            perRep.map((r) => median(r.lateness)),
            { unit: "ms", digits: 0, signed: true },
          ),
        );
        if (unwritten)
          rows.push(
            figure(
              'the keeper\'s durable "called" write (its SQLite INSERT before the app call): workerd CPU per waited run',
              perRep.map((r) => r.wait.cpu - r.unwritten.cpu),
              {
                unit: "ms",
                digits: 3,
                signed: true,
                cost: true,
                vs: "the same bundle without that write",
                key: "wait-write-cpu",
              },
            ),
            figure(
              "the same write: p50 at 1 connection",
              perRep.map((r) => r.wait.p50 - r.unwritten.p50),
              {
                unit: "ms",
                digits: 3,
                signed: true,
                cost: true,
                vs: "the same bundle without that write",
                key: "wait-write-p50",
              },
            ),
          );
        const bad = perRep.reduce((n, r) => n + r.wait.bad + r.sync.bad, 0);
        if (bad) notes.push(`non-2xx answers under load: ${bad}`);
      }

      // The status stream: an async run of an app that answers after 500 ms, followed from its 202;
      // its end event timed from the moment the app answered (the change comes after it, so this is an upper bound).
      const accepted = await fetch(`${runUrl}?async=true&delay=500`, { headers });
      const acceptedBody = await accepted.json().catch(() => ({}));
      const statusUrl = acceptedBody.status_url ?? acceptedBody.urls?.stream ?? acceptedBody.urls?.get;
      const streamProbe = statusUrl ? await follow(new URL(statusUrl, gateway.url).href, headers, 30_000) : null;
      if (!streamProbe?.at) {
        notes.push(
          `status stream: not measured: ${statusUrl ? "the status URL did not answer an event stream ending in a terminal state" : `the async run answered ${accepted.status} without a status URL`}.`,
        );
      } else {
        const latest = [];
        for (let rep = 1; rep <= ctx.reps; rep++) {
          ctx.log(`wait rep ${rep}/${ctx.reps}: status stream`);
          const delays = [];
          for (let i = 0; i < 3; i++) {
            const response = await fetch(`${runUrl}?async=true&delay=500`, { headers });
            const body = await response.json();
            const url = new URL(body.status_url ?? body.urls?.stream ?? body.urls?.get, gateway.url).href;
            const seen = await follow(url, headers, 30_000);
            // The app's note of its answer is made before its bytes leave, so it is never later than the change.
            await sleep(10);
            const answered = app.answeredAt.get(body.run_id);
            if (!seen?.at || answered === undefined)
              throw new Error(`bench wait: run ${body.run_id} not followed to its end`);
            delays.push(seen.at - answered);
          }
          latest.push(Math.max(...delays));
        }
        rows.push(
          figure("status stream: the end event after the app's answer, the worst of 3 per rep", latest, {
            unit: "ms",
            digits: 0,
            key: "status-event",
            target: ["<=", 100],
          }),
        );
      }
      return { rows, notes };
    } finally {
      await unwritten?.dispose();
      await gateway.mf.dispose();
      await app.close();
    }
  },
};
