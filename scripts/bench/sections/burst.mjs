// A burst to one receiver: `--burst=N` runs (10,000 by default) with `webhookEndpoint` to one origin, as
// fast as the gateway takes them, then the drain of that receiver's lane, against its bound: concurrency
// ÷ attempt time (6 ÷ 50 ms = 120 attempts a second). Two receivers, each its own gateway: one answering
// every request in 50 ms, one where one answer in three (every third request) is a 404, which asks for
// a retry. The drain is taken from the end of the runs (the backlog then in the lane) to the last
// attempt, from the attempts' own records (the delivery logs); for the second, attempts are counted (pauses excluded,
// since a pause holds no connection) while the backlog lasts: to the start of its last first attempt,
// after which the lane only waits out the last retries' pauses (the whole drain is printed beside it). Beside it: the first attempt's p95 after its run, over the burst's
// last 1,000 deliveries, and the longest gap between attempts (the spec's 5 s). The receivers run on
// the core wrk gets, as the outside world they stand for; the gateway keeps its own.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { deliveryRows } from "../gateway.mjs";
import { figure, percentile } from "../report.mjs";

const ANSWER_MS = 50;
const CONCURRENCY = 6;
const BOUND_PER_S = CONCURRENCY / (ANSWER_MS / 1000);
const RUN_CONCURRENCY = 32;
const SETTLE_MS = 20 * 60_000;

/**
 * A receiver answering after ANSWER_MS: 200, or for every `retryEvery`-th request a 404. Its own process,
 * on `cpu` when the bench pins (the core wrk gets), so that the lane's figures are the gateway's alone.
 */
async function startReceiver(retryEvery, cpu) {
  const script = fileURLToPath(new URL("../burst-receiver.mjs", import.meta.url));
  const args = [script, String(ANSWER_MS), String(retryEvery)];
  const child =
    cpu === undefined
      ? spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] })
      : spawn("taskset", ["-c", String(cpu), process.execPath, ...args], { stdio: ["ignore", "pipe", "inherit"] });
  const [line] = await once(createInterface({ input: child.stdout }), "line");
  return {
    url: line.trim(),
    close: async () => {
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      await exited;
    },
  };
}

async function burstOnce(ctx, runs, retryEvery) {
  // BENCH_LANE_LOG=<file>: each lane alarm's log line (attempts, subrequests, D1 trips, duration) appended there.
  const laneLog = process.env.BENCH_LANE_LOG;
  const gateway = await ctx.startGateway(ctx.bundle, {
    sharedOptions: laneLog
      ? {
          handleStructuredLogs: (l) => {
            if (String(l.message).includes("webhook lane alarm"))
              appendFileSync(laneLog, `${retryEvery ? "retried" : "fast"} ${l.timestamp} ${l.message}\n`);
          },
        }
      : {},
  });
  const receiver = await startReceiver(retryEvery, ctx.wrkCpu);
  const upstream = await ctx.startPeer();
  try {
    const seed = await ctx.seedRunnableApp(gateway.url, upstream.url);
    const endpoint = encodeURIComponent(`${receiver.url}/hook`);
    let next = 0;
    const worker = async () => {
      while (next < runs) {
        next++;
        const r = await fetch(`${gateway.url}${seed.runPath}?webhookEndpoint=${endpoint}`, {
          method: "POST",
          headers: { Authorization: `Bearer ${seed.token}`, "Content-Type": "application/json" },
          body: "{}",
        });
        await r.arrayBuffer();
      }
    };
    await Promise.all(Array.from({ length: RUN_CONCURRENCY }, worker));
    const sentAt = Date.now();
    const deadline = sentAt + SETTLE_MS;
    for (;;) {
      const row = { n: 0, pending: 0 };
      for (const part of await deliveryRows(
        gateway,
        "SELECT count(*) AS n, coalesce(sum(status = 'pending'), 0) AS pending FROM webhook_deliveries",
      )) {
        row.n += part.n;
        row.pending += part.pending;
      }
      if ((row.n >= runs && row.pending === 0) || Date.now() > deadline) break;
      // The drain's figures come from the records; this only finds its end. Each look scans the deliveries
      // in the gateway's stores, on the gateway's core: seldom enough to take no share of the lane's.
      await new Promise((r) => setTimeout(r, 3_000));
    }
    const attempts = (
      await deliveryRows(
        gateway,
        "SELECT a.delivery_id, a.attempt, a.at, a.duration_ms, d.created_at FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id",
      )
    ).sort((a, b) => a.at - b.at);
    const after = attempts.filter((a) => a.at >= sentAt);
    const lastEnd = Math.max(...attempts.map((a) => a.at + a.duration_ms));
    const drainS = (lastEnd - sentAt) / 1000;
    const delivered = (
      await deliveryRows(gateway, "SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'delivered'")
    ).reduce((sum, part) => sum + part.n, 0);
    const firsts = attempts.filter((a) => a.attempt === 1).sort((a, b) => a.created_at - b.created_at);
    const lastThousand = firsts.slice(-1000).map((a) => a.at - a.created_at);
    const byDelivery = new Map();
    for (const a of attempts) byDelivery.set(a.delivery_id, [...(byDelivery.get(a.delivery_id) ?? []), a]);
    let longestGap = 0;
    for (const list of byDelivery.values()) {
      list.sort((a, b) => a.attempt - b.attempt);
      for (let i = 1; i < list.length; i++)
        longestGap = Math.max(longestGap, list[i].at - (list[i - 1].at + list[i - 1].duration_ms));
    }
    const deliveriesAfter = new Set(after.filter((a) => a.attempt === 1).map((a) => a.delivery_id)).size;
    // While the backlog lasts (to the start of its last first attempt) a slot left free is the lane's:
    // first attempts are there to fill it. After it, the lane only waits out the last retries' pauses.
    const lastFirstAt = Math.max(...after.filter((a) => a.attempt === 1).map((a) => a.at));
    const backlogS = (lastFirstAt - sentAt) / 1000;
    const backlogAttempts = after.filter((a) => a.at <= lastFirstAt).length;
    return {
      runs,
      backlogAtEnd: deliveriesAfter,
      attemptsAfter: after.length,
      drainS,
      attemptsPerS: after.length / drainS,
      backlogS,
      backlogAttemptsPerS: backlogAttempts / backlogS,
      deliveriesPerS: deliveriesAfter / drainS,
      delivered,
      meanAttemptMs: attempts.reduce((s, a) => s + a.duration_ms, 0) / attempts.length,
      // The attempts of the drain as the gateway timed them: on a loaded machine far above ANSWER_MS.
      meanDrainAttemptMs: after.reduce((s, a) => s + a.duration_ms, 0) / Math.max(1, after.length),
      p95FirstAfterRunMs: percentile(lastThousand, 95),
      longestGapMs: longestGap,
    };
  } finally {
    await receiver.close();
    await upstream.close();
    await gateway.mf.dispose();
  }
}

export default {
  id: "burst",
  title: `Burst to one receiver (concurrency ${CONCURRENCY}, answers in ${ANSWER_MS} ms: bound ${BOUND_PER_S}/s)`,
  async run(ctx) {
    // `--burst=N`; the CI smoke (`--deliveries=50`) gets ten times its deliveries, not the full burst.
    const runs = Number(
      ctx.options?.burst ?? (ctx.options?.deliveries ? Math.min(10_000, 10 * Number(ctx.options.deliveries)) : 10_000),
    );
    const fast = [];
    const retried = [];
    for (let rep = 1; rep <= ctx.reps; rep++) {
      fast.push(await burstOnce(ctx, runs, 0));
      retried.push(await burstOnce(ctx, runs, 3));
    }
    const pick = (list, f) => list.map(f);
    const notes = [...fast, ...retried].map(
      (r, i) =>
        `${i < fast.length ? "200s" : "1 in 3 a 404"}: ${r.runs} runs, ${r.backlogAtEnd} still to attempt when the runs ended, drained in ${r.drainS.toFixed(1)} s, ` +
        `${r.attemptsAfter} attempts (${r.attemptsPerS.toFixed(1)}/s; ${r.backlogAttemptsPerS.toFixed(1)}/s in the ${r.backlogS.toFixed(1)} s of the backlog), ${r.delivered} delivered, mean attempt ${r.meanAttemptMs.toFixed(0)} ms (${r.meanDrainAttemptMs.toFixed(0)} ms in the drain), ` +
        `first attempt p95 after its run ${r.p95FirstAfterRunMs} ms (last 1,000), longest gap ${r.longestGapMs} ms`,
    );
    return {
      rows: [
        figure(
          `${runs} deliveries to a receiver answering 200 in ${ANSWER_MS} ms: drained deliveries/s ÷ bound`,
          pick(fast, (r) => r.deliveriesPerS / BOUND_PER_S),
          { unit: "×", digits: 2, key: "burst-fast", target: [">=", 0.8] },
        ),
        figure(
          "… ÷ the bound at the attempt time this machine measured (6 ÷ mean recorded attempt of the drain)",
          pick(fast, (r) => r.deliveriesPerS / (CONCURRENCY / (r.meanDrainAttemptMs / 1000))),
          { unit: "×", digits: 2, key: "burst-fast-measured", target: [">=", 0.8] },
        ),
        figure(
          "… the first attempt's p95 after its run, the burst's last 1,000",
          pick(fast, (r) => r.p95FirstAfterRunMs),
          { unit: "ms", digits: 0, key: "burst-fast-p95" },
        ),
        figure(
          `${runs} deliveries, one answer in three a 404 (retried): attempts/s while the backlog lasts ÷ bound`,
          pick(retried, (r) => r.backlogAttemptsPerS / BOUND_PER_S),
          { unit: "×", digits: 2, key: "burst-retried", target: [">=", 0.8] },
        ),
        figure(
          "… attempts/s over the whole drain (its end: the last retries' pauses, the lane waiting) ÷ bound",
          pick(retried, (r) => r.attemptsPerS / BOUND_PER_S),
          { unit: "×", digits: 2, key: "burst-retried-drain" },
        ),
        figure(
          "… ÷ the bound at the attempt time this machine measured (6 ÷ mean recorded attempt of the drain)",
          pick(retried, (r) => r.backlogAttemptsPerS / (CONCURRENCY / (r.meanDrainAttemptMs / 1000))),
          { unit: "×", digits: 2, key: "burst-retried-measured", target: [">=", 0.8] },
        ),
        figure(
          "… the first attempt's p95 after its run, the burst's last 1,000",
          pick(retried, (r) => r.p95FirstAfterRunMs),
          { unit: "ms", digits: 0, key: "burst-retried-p95" },
        ),
        figure(
          "longest gap between attempts, both receivers (spec: ≤ 5 s)",
          [...fast, ...retried].map((r) => r.longestGapMs),
          { unit: "ms", digits: 0, key: "burst-gap", target: ["<=", 5000] },
        ),
      ],
      notes,
    };
  },
};
