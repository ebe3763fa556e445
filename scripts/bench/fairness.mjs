// The fairness section of `npm run bench`: webhook lanes under mixed load, on the real local queue broker
// (Miniflare's, one batch at a time, wrangler.toml's batch size), in a gateway of its own whose attempts
// time out after 2 s (as in the tests), so its slow lanes drain in seconds and are disposed of with it.
import { seedRunnableApp, startGateway } from "./gateway.mjs";
import { startPeer } from "./peers.mjs";
import { figure, printRows } from "./report.mjs";

const TIMEOUT_MS = 2_000;
/** Longer than the timeout: a slow receiver holds each connection for the whole timeout. */
const HOLD_MS = 10_000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `peer` has seen `n` requests, or after `ms` (then the figures say what was missing). */
async function seen(peer, n, ms) {
  const deadline = Date.now() + ms;
  while (peer.arrivals.length < n && Date.now() < deadline) await sleep(20);
}

/** The gaps between consecutive arrivals (ms), as the receiver saw them. */
const gaps = (arrivals) => arrivals.slice(1).map((at, i) => at - arrivals[i]);

export async function benchFairness(bundle, upstreamUrl) {
  const gateway = await startGateway(bundle, { extraBindings: { WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) } });
  const peers = [];
  const peer = async (options) => {
    const p = await startPeer(options);
    peers.push(p);
    return p;
  };
  try {
    const seed = await seedRunnableApp(gateway.url, upstreamUrl);
    const auth = { Authorization: `Bearer ${seed.token}` };
    const run = (p) =>
      fetch(`${gateway.url}${seed.runPath}?webhookEndpoint=${encodeURIComponent(`${p.url}/hook`)}`, {
        headers: auth,
      }).then((r) => r.arrayBuffer());

    // A: 30 runs whose receiver times out, then 10 to a fast receiver and one to a 404, at once.
    const slowA = await peer({ delayMs: HOLD_MS, status: 204 });
    const fastA = await peer({ status: 204 });
    const missingA = await peer({ status: 404 });
    await Promise.all(Array.from({ length: 30 }, () => run(slowA)));
    let started = performance.now();
    await Promise.all([...Array.from({ length: 10 }, () => run(fastA)), run(missingA)]);
    await seen(fastA, 10, 10_000);
    await seen(missingA, 3, 15_000);
    const a = { fastMs: Math.max(...fastA.arrivals) - started, missing: missingA.arrivals.map((at) => at - started) };

    // B, the mixed load: a lane full of receivers that hold each connection for the whole timeout (30
    // runs, 24 queued behind the 6 in flight), 5 fast receivers on origins of their own; once the first
    // slow attempts have timed out and wait for their retries, 5 more slow runs, a 404 on an origin of
    // its own and 5 more fast ones.
    const slowB = await peer({ delayMs: HOLD_MS, status: 204 });
    const firstFast = await Promise.all(Array.from({ length: 5 }, () => peer({ status: 204 })));
    const laterFast = await Promise.all(Array.from({ length: 5 }, () => peer({ status: 204 })));
    const missingB = await peer({ status: 404 });
    await Promise.all(Array.from({ length: 30 }, () => run(slowB)));
    started = performance.now();
    await Promise.all(firstFast.map(run));
    await Promise.all(firstFast.map((p) => seen(p, 1, 10_000)));
    const firstFastMs = Math.max(...firstFast.map((p) => p.arrivals[0] - started));
    while (slowB.arrivals.length < 12 && performance.now() - started < 15_000) await sleep(50);
    await Promise.all(Array.from({ length: 5 }, () => run(slowB)));
    started = performance.now();
    await Promise.all([run(missingB), ...laterFast.map(run)]);
    await Promise.all(laterFast.map((p) => seen(p, 1, 10_000)));
    await seen(missingB, 3, 20_000);
    const b = {
      firstFastMs,
      laterFastMs: Math.max(...laterFast.map((p) => p.arrivals[0] - started)),
      missing: missingB.arrivals.map((at) => at - started),
    };
    return { a, b };
  } finally {
    await gateway.mf.dispose();
    await Promise.all(peers.map((p) => p.close()));
  }
}

/** The section's rows, each figure against its target, over the repetitions (`perRep`: what benchFairness answered, once per rep). */
export function printFairness(perRep) {
  const each = (pick) => perRep.map(pick);
  // A delivery's three attempts, on time: the first within 2 s of its run, each gap ≤ 5 s. The row's
  // value is the worst margin: the larger of (first − 2 s) and (largest gap − 5 s), so ≤ 0 is on time.
  const lateness = (times) =>
    times.length === 3 ? Math.max(times[0] - 2000, ...gaps(times).map((g) => g - 5000)) : Number.POSITIVE_INFINITY;
  printRows(
    `### Fairness on the real queue (attempts time out after ${TIMEOUT_MS / 1000} s, slow receivers hold each connection ${HOLD_MS / 1000} s; ${perRep.length} reps)`,
    [
      figure(
        "A: 10 fast + a 404 behind 30 slow: last fast delivery received, from its run",
        each((r) => r.a.fastMs),
        {
          unit: "ms",
          digits: 0,
          key: "fairness-a-fast",
          target: ["<=", 2000],
        },
      ),
      figure(
        "A: the 404's 3 attempts, worst of (first − 2 s, gap − 5 s)",
        each((r) => lateness(r.a.missing)),
        {
          unit: "ms",
          digits: 0,
          signed: true,
          key: "fairness-a-404",
          target: ["<=", 0],
        },
      ),
      figure(
        "B: a lane of 35 that hold each connection: 5 fast on origins of their own, last received",
        each((r) => r.b.firstFastMs),
        {
          unit: "ms",
          digits: 0,
          key: "fairness-b-fast",
          target: ["<=", 2000],
        },
      ),
      figure(
        "B, once the first slow attempts timed out: 5 more fast, last received",
        each((r) => r.b.laterFastMs),
        {
          unit: "ms",
          digits: 0,
          key: "fairness-b-later",
          target: ["<=", 2000],
        },
      ),
      figure(
        "B: a 404 on an origin of its own: its 3 attempts, worst of (first − 2 s, gap − 5 s)",
        each((r) => lateness(r.b.missing)),
        {
          unit: "ms",
          digits: 0,
          signed: true,
          key: "fairness-b-404",
          target: ["<=", 0],
        },
      ),
    ],
    { section: "2. fairness" },
  );
}
