// A webhook in the time a receiver notices: from the moment the caller has a run's whole answer to the
// moment the receiver gets that run's delivery (matched by `run_id` in the delivered body), at 1 run/s
// and at 100 runs/s (runs started on a fixed schedule, not one after another's answer). Per repetition
// its percentiles; the rows show their spread over repetitions.
import { createServer } from "node:http";
import { listenOnLoopback } from "./peers.mjs";
import { figure, percentile, printRows } from "./report.mjs";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const WAIT_FOR_LAST_MS = 30_000;

/** A receiver that answers 204 and notes when each run's delivery arrived (performance.now()). */
async function startReceiver() {
  const arrivals = new Map();
  const waiters = new Set();
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const at = performance.now();
      try {
        const runId = JSON.parse(Buffer.concat(chunks).toString()).run_id;
        if (runId && !arrivals.has(runId)) arrivals.set(runId, at);
      } catch {
        // Not a delivery of ours: answered all the same.
      }
      res.writeHead(204).end();
      for (const w of waiters) w();
    });
  });
  server.keepAliveTimeout = 60_000;
  const url = await listenOnLoopback(server);
  return {
    url,
    arrivals,
    /** Resolves once every id in `ids` has arrived, or after `ms`. */
    async waitFor(ids, ms) {
      const deadline = performance.now() + ms;
      while (ids.some((id) => !arrivals.has(id)) && performance.now() < deadline) {
        await Promise.race([new Promise((r) => waiters.add(r)), sleep(100)]);
        waiters.clear();
      }
    },
    close: () => new Promise((r) => (server.closeAllConnections(), server.close(r))),
  };
}

/**
 * `rate` runs per second for `count` runs, each started on its slot of the schedule; answers the
 * delays (ms) from each answer to its delivery, and how many were not received within 30 s.
 */
async function burst({ runUrl, headers, receiver, rate, count }) {
  const answered = new Map();
  const started = performance.now();
  const runs = [];
  for (let i = 0; i < count; i++) {
    const slot = started + (i * 1000) / rate;
    const wait = slot - performance.now();
    if (wait > 0) await sleep(wait);
    runs.push(
      fetch(runUrl, { headers }).then(async (response) => {
        const body = await response.text();
        const at = performance.now();
        if (!response.ok) throw new Error(`bench latency: run ${response.status} ${body.slice(0, 200)}`);
        answered.set(JSON.parse(body).run_id, at);
      }),
    );
  }
  await Promise.all(runs);
  const ids = [...answered.keys()];
  await receiver.waitFor(ids, WAIT_FOR_LAST_MS);
  const delays = ids
    .filter((id) => receiver.arrivals.has(id))
    .map((id) => receiver.arrivals.get(id) - answered.get(id));
  return { delays, missing: ids.length - delays.length };
}

/**
 * Per repetition: `4 × seconds` runs at 1 run/s, then `seconds` seconds of 100 runs/s, each with a
 * webhook to a fast receiver of its own, through the gateway at `gatewayUrl` (`seed` from seedRunnableApp).
 */
export async function benchLatency({ gatewayUrl, seed, reps, seconds, log }) {
  const receiver = await startReceiver();
  try {
    const runUrl = `${gatewayUrl}${seed.runPath}?webhookEndpoint=${encodeURIComponent(`${receiver.url}/hook`)}`;
    const headers = { Authorization: `Bearer ${seed.token}` };
    // One unrecorded delivery first: the lane of this receiver exists before anything is timed.
    await burst({ runUrl, headers, receiver, rate: 1, count: 1 });
    const perRep = [];
    for (let rep = 1; rep <= reps; rep++) {
      log(`latency rep ${rep}/${reps}: ${4 * seconds} runs at 1 run/s, then ${seconds} s at 100 runs/s`);
      const slow = await burst({ runUrl, headers, receiver, rate: 1, count: 4 * seconds });
      const fast = await burst({ runUrl, headers, receiver, rate: 100, count: 100 * seconds });
      perRep.push({ slow, fast });
    }
    return { perRep, seconds };
  } finally {
    await receiver.close();
  }
}

export function printLatency({ perRep, seconds }) {
  const missing = perRep.reduce((n, r) => n + r.slow.missing + r.fast.missing, 0);
  printRows(
    `### A webhook in the time a receiver notices: the run's answer → the receiver's request (${4 * seconds} runs at 1 run/s and ${100 * seconds} at 100 runs/s per rep, ${perRep.length} reps, a fast receiver)`,
    [
      figure(
        "a webhook, run answered → received: p50 at 1 run/s",
        perRep.map((r) => percentile(r.slow.delays, 50)),
        { unit: "ms", digits: 0, key: "latency-p50-1", target: ["<=", 150] },
      ),
      figure(
        "a webhook, run answered → received: p95 at 1 run/s",
        perRep.map((r) => percentile(r.slow.delays, 95)),
        { unit: "ms", digits: 0, key: "latency-p95-1", target: ["<=", 400] },
      ),
      figure(
        "a webhook, run answered → received: p50 at 100 runs/s",
        perRep.map((r) => percentile(r.fast.delays, 50)),
        { unit: "ms", digits: 0 },
      ),
      figure(
        "a webhook, run answered → received: p95 at 100 runs/s",
        perRep.map((r) => percentile(r.fast.delays, 95)),
        { unit: "ms", digits: 0, key: "latency-p95-100", target: ["<=", 1000] },
      ),
    ],
    { section: "2. webhook latency" },
  );
  console.log(`\nDeliveries not received within ${WAIT_FOR_LAST_MS / 1000} s of their run: **${missing}**.`);
}
