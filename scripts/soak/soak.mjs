// The soak (`npm run soak`) has two parts: the runs soak (scripts/soak/runs.mjs: every mode, hang-ups,
// deadlines, a restart; the app called once per run, no result lost), and the deliveries soak below.
//
// The deliveries soak: N runs with `webhookEndpoint` through the built Worker under Miniflare (local D1, Queues,
// R2), loopback only, against a receiver that flaps between 200, 404, 500, 302, timeouts and dropped
// connections, and a share of runs whose receiver refuses connections. It stops by itself and checks
// that nothing was lost: every run has exactly one delivery record, delivered or failed, with the
// attempts the outcome table says, never more than 3; every caller got 200.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildBundle, deliveryRows, seedRunnableApp, startGateway } from "../bench/gateway.mjs";
import { startPeer } from "../bench/peers.mjs";
import { answerFor, closedPort, expectedOutcome, outcomeOfTrail, startFlappingReceiver } from "./outcomes.mjs";
import { soakRuns } from "./runs.mjs";

export { buildBundle };

/** How long one attempt waits for the receiver (WEBHOOK_TIMEOUT_MS); a "timeout" answer never comes. */
// Not much shorter: under load on 2 cores a prompt 200 may take a few hundred ms to be seen, and a late
// answer would count as a timeout the outcome table did not expect. Not longer either: the local queue
// hands out one batch at a time and a batch lasts as long as its slowest attempt.
const WEBHOOK_TIMEOUT_MS = 500;
/** The spec's longest gap between the end of one attempt and the start of the next. */
const MAX_GAP_MS = 5_000;
/** One run in this many targets the refused port. */
const REFUSED_EVERY = 10;

/** The Worker's log lines: counted by level (thousands of "delivery failed" lines are expected here). */
export const workerLogs = { lines: 0, byLevel: {} };

export function startSoakGateway(bundle) {
  return startGateway(bundle, {
    // No domain is checked in the soak: a resolver that is never asked.
    dnsResolverUrl: "http://127.0.0.1:9/dns-query",
    extraBindings: { WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS) },
    // The local queue as wrangler.toml configures it: the consumer only hands deliveries to their lanes
    // (src/webhooks/lane.ts), which make the attempts, so one batch at a time keeps up.
    sharedOptions: {
      handleStructuredLogs: (log) => {
        workerLogs.lines++;
        workerLogs.byLevel[log.level] = (workerLogs.byLevel[log.level] ?? 0) + 1;
      },
    },
  });
}

/**
 * Runs the soak on a started gateway; resolves with the figures and the list of violations (empty when
 * nothing was lost). `log` receives progress lines.
 */
export async function soak({ gateway, runs, concurrency = 32, settleTimeoutMs = 120_000, log = () => undefined }) {
  const upstream = await startPeer();
  const receiver = await startFlappingReceiver();
  const refusedUrl = await closedPort();
  try {
    const seed = await seedRunnableApp(gateway.url, upstream.url);
    const errorLinesBefore = workerLogs.byLevel.error ?? 0;
    const statuses = new Map();
    const refusedRuns = new Set();
    let next = 0;
    const started = performance.now();
    const worker = async () => {
      while (next < runs) {
        const i = next++;
        const refused = i % REFUSED_EVERY === REFUSED_EVERY - 1;
        const endpoint = refused ? `${refusedUrl}/hook` : `${receiver.url}/hook`;
        const response = await fetch(`${gateway.url}${seed.runPath}?webhookEndpoint=${encodeURIComponent(endpoint)}`, {
          method: "POST",
          headers: {
            Authorization: `Bearer ${seed.token}`,
            "Content-Type": "application/json",
            ...(i % 2 ? { "X-Webhook-Secret": `soak-secret-${i}` } : {}),
          },
          body: JSON.stringify({ inputs: { i } }),
        });
        const text = await response.text();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        if (response.status === 200 && refused) refusedRuns.add(JSON.parse(text).run_id);
        if ((i + 1) % 1000 === 0) log(`${i + 1} runs sent`);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const runsMs = performance.now() - started;
    log(`${runs} runs in ${(runsMs / 1000).toFixed(1)} s; waiting for deliveries to settle`);

    // Settled: one record per run, none pending. The queue needs a few seconds of tail (retry delays
    // of 1 s and 3 s, plus its 1 s batch wait, plus timeouts).
    const deadline = Date.now() + settleTimeoutMs;
    let counts;
    for (;;) {
      counts = await deliveryRows(gateway, "SELECT status, count(*) AS n FROM webhook_deliveries GROUP BY status");
      const total = counts.reduce((sum, row) => sum + row.n, 0);
      const pending = counts.filter((row) => row.status === "pending").reduce((sum, row) => sum + row.n, 0);
      if (total >= runs && pending === 0) break;
      if (Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const settleMs = performance.now() - started - runsMs;

    // A delivery and its attempts are in one store (its log, or D1).
    const rows = await deliveryRows(
      gateway,
      `SELECT d.id, d.run_id, d.status, d.attempt_count, d.last_status_code, d.last_error, count(a.attempt) AS attempt_rows, max(a.attempt) AS max_attempt
       FROM webhook_deliveries d LEFT JOIN webhook_attempts a ON a.delivery_id = d.id GROUP BY d.id`,
    );
    const violations = [];
    const byRun = new Map();
    for (const row of rows) byRun.set(row.run_id, (byRun.get(row.run_id) ?? 0) + 1);
    const duplicates = [...byRun.values()].filter((n) => n !== 1).length;
    if (duplicates) violations.push(`${duplicates} run(s) with more than one delivery record`);
    if (rows.length !== runs) violations.push(`${rows.length} delivery records for ${runs} runs`);
    if ((statuses.get(200) ?? 0) !== runs)
      violations.push(`caller statuses ${JSON.stringify(Object.fromEntries(statuses))}`);

    // Every attempt as recorded, per delivery. On a busy machine an attempt may time out though the
    // receiver meant to answer it (its answer read too late, or its request never sent in time): the
    // receiver's plan, which numbers attempts by arrival, then no longer says what the gateway saw.
    const attempts = new Map();
    const attemptRows = await deliveryRows(
      gateway,
      "SELECT delivery_id, attempt, at, status_code, error, duration_ms FROM webhook_attempts ORDER BY attempt",
    );
    for (const a of attemptRows) {
      attempts.set(a.delivery_id, [...(attempts.get(a.delivery_id) ?? []), a]);
    }
    let disturbed = 0;
    let earlyTimeouts = 0;
    /** Whether load disturbed the delivery; a timeout before WEBHOOK_TIMEOUT_MS is counted as the gateway's fault. */
    const disturbedByLoad = (row) => {
      let late = false;
      for (const a of attempts.get(row.id) ?? []) {
        if (a.error !== "timeout") continue;
        if (a.duration_ms < WEBHOOK_TIMEOUT_MS) earlyTimeouts++;
        else if (answerFor(row.run_id, a.attempt) !== "timeout") late = true;
      }
      return late;
    };
    const trailOf = (row) =>
      (attempts.get(row.id) ?? [])
        .map(
          (a) =>
            `#${a.attempt} ${a.status_code ?? a.error} in ${a.duration_ms} ms (meant ${answerFor(row.run_id, a.attempt)})`,
        )
        .join(", ");

    const tally = { delivered: 0, failed: 0, pending: 0 };
    const attemptsHistogram = { 1: 0, 2: 0, 3: 0 };
    let mismatches = 0;
    let overBudget = 0;
    let receiverDisagrees = 0;
    for (const row of rows) {
      tally[row.status] = (tally[row.status] ?? 0) + 1;
      attemptsHistogram[row.attempt_count] = (attemptsHistogram[row.attempt_count] ?? 0) + 1;
      const refused = refusedRuns.has(row.run_id);
      // Disturbed deliveries are held to the outcome table over what the gateway recorded; the others
      // to the receiver's plan, and to the receiver's own count.
      const byLoad = !refused && disturbedByLoad(row);
      if (byLoad) disturbed++;
      const expected = byLoad ? outcomeOfTrail(attempts.get(row.id) ?? []) : expectedOutcome(row.run_id, refused);
      if (
        row.status !== expected.status ||
        row.attempt_count !== expected.attempts ||
        row.attempt_rows !== expected.attempts
      ) {
        if (mismatches++ < 5) {
          // Each attempt as recorded and as the receiver meant to answer it: where they part says why.
          const trail = trailOf(row);
          violations.push(
            `delivery ${row.id}: ${row.status}/${row.attempt_count} attempts (${row.attempt_rows} recorded, ${receiver.seen.get(row.run_id) ?? 0} received: ${trail}), expected ${expected.status}/${expected.attempts}${refused ? " (refused)" : ""}`,
          );
        }
      }
      if (row.attempt_count > 3 || row.max_attempt > 3) overBudget++;
      // The receiver's own count: every attempt that reached it (refused ones never do).
      const reached = receiver.seen.get(row.run_id) ?? 0;
      if (!byLoad && reached !== (refused ? 0 : expected.attempts) && receiverDisagrees++ < 5)
        violations.push(
          `delivery ${row.id}: the receiver saw ${reached} attempts, ${refused ? 0 : expected.attempts} expected (${trailOf(row)})`,
        );
    }
    if (mismatches) violations.push(`${mismatches} deliveries differ from the outcome table`);
    // A timeout before WEBHOOK_TIMEOUT_MS would be the gateway's own fault, not the machine's.
    if (earlyTimeouts) violations.push(`${earlyTimeouts} attempts recorded as timeouts before WEBHOOK_TIMEOUT_MS`);
    if (overBudget) violations.push(`${overBudget} deliveries beyond 3 attempts`);
    // The spec's gap, from the records: the end of one attempt (its start + its duration) to the start of the next.
    let longestGapMs = 0;
    let gapsOver = 0;
    for (const list of attempts.values())
      for (let n = 1; n < list.length; n++) {
        const gap = list[n].at - (list[n - 1].at + list[n - 1].duration_ms);
        longestGapMs = Math.max(longestGapMs, gap);
        if (gap > MAX_GAP_MS && gapsOver++ < 5)
          violations.push(`delivery ${list[n].delivery_id}: ${gap} ms before attempt ${list[n].attempt}`);
      }
    if (gapsOver) violations.push(`${gapsOver} gaps between attempts over ${MAX_GAP_MS} ms`);
    if (receiverDisagrees) violations.push(`${receiverDisagrees} deliveries where the receiver's count differs`);
    // The Worker logs exactly one error line per failed delivery, and no other error (a D1 or queue fault would show).
    const errorLines = (workerLogs.byLevel.error ?? 0) - errorLinesBefore;
    if (errorLines !== tally.failed)
      violations.push(`${errorLines} error log lines for ${tally.failed} failed deliveries`);
    const attemptsTotal = rows.reduce((sum, row) => sum + row.attempt_rows, 0);
    return {
      runs,
      concurrency,
      runsPerSecond: runs / (runsMs / 1000),
      runsSeconds: runsMs / 1000,
      /** From the last run's answer until no delivery was pending (or the settle window ran out). */
      drainSeconds: settleMs / 1000,
      longestGapMs,
      callerStatuses: Object.fromEntries(statuses),
      records: rows.length,
      tally,
      attemptsHistogram,
      attemptsTotal,
      disturbedByLoad: disturbed,
      refusedRuns: refusedRuns.size,
      workerLogLines: { ...workerLogs.byLevel },
      violations,
    };
  } finally {
    await receiver.close();
    await upstream.close();
  }
}

/**
 * `npm run soak [-- --runs=1000 --deliveries=10000 --concurrency=32 --seed=1 --only=runs|deliveries]`:
 * the runs soak (mixed modes, hang-ups, deadlines, a restart: scripts/soak/runs.mjs), then the
 * deliveries soak (runs with webhooks to a flapping receiver, above).
 */
async function main() {
  const options = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=")));
  const only = options.only;
  const concurrency = Number(options.concurrency ?? 32);
  const log = (...args) => console.error("soak:", ...args);
  const workdir = mkdtempSync(join(tmpdir(), "edge-gateway-soak-"));
  log("building the Worker bundle");
  const bundle = buildBundle(join(workdir, "dist"));
  const failures = [];
  try {
    if (only === undefined || only === "runs") {
      const runs = Number(options.runs ?? 1000);
      log(`runs soak: ${runs} mixed runs (sync, Prefer: wait, async), hang-ups, deadlines, one restart`);
      const result = await soakRuns({
        bundle,
        runs,
        concurrency: Math.min(concurrency, 24),
        seed: Number(options.seed ?? 1),
        persistDir: join(workdir, "state"),
        settleTimeoutMs: Number(options.settle ?? 600_000),
        log,
      });
      console.log(JSON.stringify({ soak: "runs", ...result }, null, 2));
      if (result.violations.length) failures.push(...result.violations);
      else
        log(
          `OK: ${runs} runs (sent in ${result.sendSeconds.toFixed(1)} s, every run ended ${result.settleSeconds.toFixed(1)} s after), ` +
            `${result.app.runIds} app calls, 0 called twice, 0 lost (lost = ${result.lostMeans}), ` +
            `every run with a status URL final (${result.interruptedByRestart} ended interrupted by the restart)`,
        );
    }
    if (only === undefined || only === "deliveries") {
      const runs = Number(options.deliveries ?? 10_000);
      log(`deliveries soak: ${runs} runs with webhooks`);
      const gateway = await startSoakGateway(bundle);
      try {
        const result = await soak({
          gateway,
          runs,
          concurrency,
          settleTimeoutMs: Number(options.settle ?? 600_000),
          log,
        });
        console.log(JSON.stringify({ soak: "deliveries", ...result }, null, 2));
        if (result.violations.length) failures.push(...result.violations);
        else
          log(
            `OK: ${result.records} deliveries for ${runs} runs, ${result.tally.delivered} delivered, ${result.tally.failed} failed, none lost; ` +
              `runs sent in ${result.runsSeconds.toFixed(1)} s, deliveries drained ${result.drainSeconds.toFixed(1)} s after them, ` +
              `${result.attemptsTotal} attempts, longest gap between attempts ${result.longestGapMs} ms` +
              (result.disturbedByLoad
                ? ` (${result.disturbedByLoad} disturbed by this machine's load, held to the outcome table over what the gateway recorded)`
                : ""),
          );
      } finally {
        await gateway.mf.dispose();
      }
    }
    if (failures.length) {
      log(`FAILED: ${failures.join("; ")}`);
      process.exitCode = 1;
    }
  } finally {
    rmSync(workdir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
