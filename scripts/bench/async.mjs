// Section 6 of `npm run bench`: async runs (`?async=true`) with webhooks, drained, beside synchronous runs
// with webhooks, in `reps` interleaved repetitions; every async run checked to end in exactly one
// terminal state with exactly one delivery.
import { figure, median, printRows } from "./report.mjs";
import { deliveryRows, storedRuns } from "./gateway.mjs";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** Runs of each kind made, unmeasured, before the first rep. */
const WARMUP_RUNS = 32;

/** Runs `work(i)` for i < n with at most `limit` at once. */
export async function pool(n, limit, work) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, n) }, async () => {
      while (next < n) await work(next++);
    }),
  );
}

/** Polls `check` until it returns true, or throws after `maxMs`. */
async function until(check, maxMs, what) {
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`bench: ${what} did not happen within ${maxMs} ms`);
}

/**
 * Per repetition, `count` runs made 32 at a time against `gateway`, each with a webhook to `receiver`,
 * synchronous and async (the order alternating between reps); each batch timed from its first request
 * until every delivery is received (and, for async runs, every run has ended). `cpu()` reads the
 * gateway's workerd CPU time (ms) or is null.
 */
export async function benchAsync({
  gateway,
  seed,
  receiver,
  count,
  reps = 1,
  cpu,
  side = null,
  log = () => {},
  maxMs = 600_000,
}) {
  const body = JSON.stringify({ inputs: { prompt: "bench" } });
  const main = { gateway, seed, receiver, cpu };

  async function measure(kind, { gateway, seed, receiver, cpu } = main, n = count) {
    const auth = { Authorization: `Bearer ${seed.token}`, "Content-Type": "application/json" };
    const hook = `webhookEndpoint=${encodeURIComponent(`${receiver.url}/hook`)}`;
    const received = receiver.count;
    const cpuBefore = cpu?.();
    const started = performance.now();
    const ids = [];
    await pool(n, 32, async () => {
      const query = kind === "async" ? `async=true&${hook}` : hook;
      const response = await fetch(`${gateway.url}${seed.runPath}?${query}`, { method: "POST", headers: auth, body });
      const answer = await response.json();
      if (response.status !== (kind === "async" ? 202 : 200))
        throw new Error(`${kind} run: ${response.status} ${JSON.stringify(answer)}`);
      ids.push(answer.run_id);
    });
    const answeredMs = performance.now() - started;
    await receiver.waitFor(received + n);
    if (kind === "async") {
      // Runs are kept by their keepers (src/runs/async/kept-runs.ts), not in D1.
      const open = async () =>
        // Only the open ones are read: the poll is inside the CPU measured, and every run kept grows a full read.
        (await storedRuns(gateway, { projectId: seed.projectId, statuses: ["queued", "running"] })).length;
      await until(async () => (await open()) === 0, maxMs, "every async run ending");
    }
    const drainedMs = performance.now() - started;
    const cpuMs = cpu ? (cpu() - cpuBefore) / n : null;
    return { ids, answeredMs, drainedMs, cpuMs, received: receiver.count - received };
  }

  // Unmeasured first: the project's keepers and delivery logs are made, and the code warmed, by the
  // first runs of each kind (the first measured rep's async runs cost ~35% more without it).
  for (const target of side ? [main, side] : [main])
    for (const kind of ["sync", "async"]) await measure(kind, target, WARMUP_RUNS);

  const perRep = [];
  const ids = [];
  let received = 0;
  for (let rep = 1; rep <= reps; rep++) {
    const figures = {};
    for (const kind of rep % 2 ? ["sync", "async"] : ["async", "sync"]) {
      log(`async rep ${rep}/${reps}: ${count} ${kind} runs with webhooks`);
      figures[kind] = await measure(kind);
    }
    ids.push(...figures.async.ids);
    received += figures.async.received;
    if (side) {
      // The same bundle beside it, its async consumer given `side.batchSize` runs per invocation.
      figures.side = {};
      for (const kind of rep % 2 ? ["async", "sync"] : ["sync", "async"]) {
        log(
          `async rep ${rep}/${reps}: ${count} ${kind} runs with webhooks, ${side.batchSize} runs per consumer invocation`,
        );
        figures.side[kind] = await measure(kind, side);
      }
    }
    perRep.push(figures);
  }

  // Exactly one terminal state and exactly one delivery record (settled) per async run.
  // The measured runs' states (the warm-up's are checked for their deliveries below, with the rest).
  const measured = new Set(ids);
  const byStatus = new Map();
  for (const run of await storedRuns(gateway, { projectId: seed.projectId }))
    if (measured.has(run.id)) byStatus.set(run.status, (byStatus.get(run.status) ?? 0) + 1);
  const states = [...byStatus].map(([status, n]) => ({ status, n }));
  // Runs whose delivery records are not exactly one, delivered.
  const wrong = async ({ gateway, seed }) => {
    // A run's deliveries are all in one store (its shard's log, or D1).
    const deliveries = new Map(
      (
        await deliveryRows(
          gateway,
          "SELECT run_id, count(*) AS n, sum(status = 'delivered') AS delivered FROM webhook_deliveries WHERE project_id = ? GROUP BY run_id",
          [seed.projectId],
        )
      ).map((row) => [row.run_id, row]),
    );
    return (await storedRuns(gateway, { projectId: seed.projectId })).filter((run) => {
      const row = deliveries.get(run.id);
      return !row || row.n !== 1 || row.delivered !== 1;
    }).length;
  };
  // The side's runs are checked too: a larger batch must not cost a delivery.
  const wrongDeliveries = (await wrong(main)) + (side ? await wrong(side) : 0);
  const distinct = new Set(ids).size;
  return {
    count,
    reps,
    perRep,
    states,
    wrongDeliveries,
    distinct,
    received,
    sideBatch: side?.batchSize ?? null,
    mainBatch: side?.mainBatch ?? null,
  };
}

const runsPer = (n) => `${n} run${n === 1 ? "" : "s"}`;

/** The section's Markdown. */
export function printAsync(figures) {
  const { count, reps, perRep, states, wrongDeliveries, distinct, received } = figures;
  const total = count * reps;
  const terminal = states
    .filter((s) => ["succeeded", "failed", "cancelled"].includes(s.status))
    .reduce((sum, s) => sum + s.n, 0);
  const of = (kind, key) => perRep.map((r) => r[kind][key]);
  const rate = (kind) => perRep.map((r) => count / (r[kind].drainedMs / 1000));
  printRows(
    `## 6. Async runs (${count} runs with webhooks per rep, made 32 at a time, ${reps} reps; queue consumer and deliveries in workerd)`,
    [
      figure(
        "CPU per async run with a webhook ÷ per synchronous run with a webhook",
        perRep.map((r) => r.async.cpuMs / r.sync.cpuMs),
        {
          unit: "x",
          key: "async-cpu",
          target: ["<=", 2],
          vs: "sync + webhook",
        },
      ),
      figure("workerd CPU per synchronous run + webhook, delivery included", of("sync", "cpuMs"), {
        unit: "ms",
        digits: 3,
      }),
      figure("workerd CPU per async run + webhook, delivery included", of("async", "cpuMs"), { unit: "ms", digits: 3 }),
      figure("synchronous: drained (every delivery received), runs/s", rate("sync"), { unit: "/s", digits: 0 }),
      figure("async: drained (every run ended, every delivery received), runs/s", rate("async"), {
        unit: "/s",
        digits: 0,
      }),
      figure(
        "async drained runs/s ÷ synchronous",
        perRep.map((r) => r.sync.drainedMs / r.async.drainedMs),
        { unit: "x" },
      ),
      ...(figures.sideBatch
        ? [
            figure(
              `the same, the async consumer given ${runsPer(figures.sideBatch)} per invocation: CPU ÷ synchronous (its own synchronous runs)`,
              perRep.map((r) => r.side.async.cpuMs / r.side.sync.cpuMs),
              { unit: "x", key: "async-cpu-side-by-side", vs: "sync + webhook" },
            ),
            figure(
              `the same, ${runsPer(figures.sideBatch)} per invocation: drained runs/s ÷ synchronous`,
              perRep.map((r) => r.side.sync.drainedMs / r.side.async.drainedMs),
              { unit: "x", key: "async-drained-side-by-side" },
            ),
            figure(
              `what ${runsPer(figures.mainBatch)} per invocation (wrangler.toml) cost against ${runsPer(figures.sideBatch)}: CPU per async run, the gateway's − the side's`,
              perRep.map((r) => r.async.cpuMs - r.side.async.cpuMs),
              { unit: "ms", digits: 3, signed: true, cost: true, key: "async-batch-against-side" },
            ),
          ]
        : []),
    ],
    { section: "6. async" },
  );
  console.log(
    `\nAsync runs: ${distinct} distinct run ids of ${total}; states ${states.map((s) => `${s.status} ${s.n}`).join(", ")}; ${terminal} of ${total} terminal; ` +
      `deliveries received ${received}; runs without exactly one delivered delivery record: **${wrongDeliveries}**; median time to answer all ${count}: ${median(of("sync", "answeredMs")).toFixed(0)} ms synchronous, ${median(of("async", "answeredMs")).toFixed(0)} ms async (202).`,
  );
  if (terminal !== total || wrongDeliveries !== 0 || distinct !== total || received !== total) {
    throw new Error("bench: async runs did not each end in exactly one terminal state with exactly one delivery");
  }
}
