// Section 5 of `npm run bench`: async runs (`?async=true`) with webhooks, drained, beside synchronous runs
// with webhooks; every async run checked to end in exactly one terminal state with exactly one delivery.

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `work(i)` for i < n with at most `limit` at once. */
async function pool(n, limit, work) {
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
 * `count` runs made 32 at a time against `gateway`, each with a webhook to `receiver`, first
 * synchronous, then async; each batch timed from its first request until every delivery is received
 * (and, for async runs, every run has ended). `cpu()` reads the gateway's workerd CPU time (ms) or is null.
 */
export async function benchAsync({ gateway, seed, receiver, count, cpu, maxMs = 600_000 }) {
  const auth = { Authorization: `Bearer ${seed.token}`, "Content-Type": "application/json" };
  const hook = `webhookEndpoint=${encodeURIComponent(`${receiver.url}/hook`)}`;
  const body = JSON.stringify({ inputs: { prompt: "bench" } });

  async function measure(kind) {
    const received = receiver.count;
    const cpuBefore = cpu?.();
    const started = performance.now();
    const ids = [];
    await pool(count, 32, async () => {
      const query = kind === "async" ? `async=true&${hook}` : hook;
      const response = await fetch(`${gateway.url}${seed.runPath}?${query}`, { method: "POST", headers: auth, body });
      const answer = await response.json();
      if (response.status !== (kind === "async" ? 202 : 200))
        throw new Error(`${kind} run: ${response.status} ${JSON.stringify(answer)}`);
      ids.push(answer.run_id);
    });
    const answeredMs = performance.now() - started;
    await receiver.waitFor(received + count);
    if (kind === "async") {
      const open = () =>
        gateway.db
          .prepare("SELECT count(*) AS n FROM async_runs WHERE project_id = ? AND status IN ('queued', 'running')")
          .bind(seed.projectId)
          .first();
      await until(async () => (await open()).n === 0, maxMs, "every async run ending");
    }
    const drainedMs = performance.now() - started;
    const cpuMs = cpu ? (cpu() - cpuBefore) / count : null;
    return { ids, answeredMs, drainedMs, cpuMs, received: receiver.count - received };
  }

  const sync = await measure("sync");
  const async = await measure("async");

  // Exactly one terminal state and exactly one delivery record (settled) per async run.
  const states = (
    await gateway.db
      .prepare("SELECT status, count(*) AS n FROM async_runs WHERE project_id = ? GROUP BY status")
      .bind(seed.projectId)
      .all()
  ).results;
  const wrongDeliveries = (
    await gateway.db
      .prepare(
        "SELECT count(*) AS n FROM async_runs a WHERE a.project_id = ? AND (SELECT count(*) || '/' || sum(d.status = 'delivered') FROM webhook_deliveries d WHERE d.run_id = a.id) IS NOT '1/1'",
      )
      .bind(seed.projectId)
      .first()
  ).n;
  const distinct = new Set(async.ids).size;
  return { count, sync, async, states, wrongDeliveries, distinct };
}

/** The section's Markdown. */
export function printAsync(figures, fmt) {
  const { count, sync, async, states, wrongDeliveries, distinct } = figures;
  const terminal = states
    .filter((s) => ["succeeded", "failed", "cancelled"].includes(s.status))
    .reduce((sum, s) => sum + s.n, 0);
  const cpuRatio = sync.cpuMs && async.cpuMs ? `${fmt(async.cpuMs / sync.cpuMs)}×` : "–";
  console.log(
    `\n## 5. Async runs (${count} runs with webhooks, made 32 at a time; queue consumer and deliveries in workerd)\n`,
  );
  console.log("| figure | synchronous run + webhook | async run + webhook |");
  console.log("|---|---:|---:|");
  console.log(
    `| all ${count} answered (202 for async) | ${fmt(sync.answeredMs, 0)} ms | ${fmt(async.answeredMs, 0)} ms |`,
  );
  console.log(
    `| drained: every run ended and every delivery received | ${fmt(sync.drainedMs, 0)} ms (${fmt(count / (sync.drainedMs / 1000), 0)} runs/s) | ${fmt(async.drainedMs, 0)} ms (${fmt(count / (async.drainedMs / 1000), 0)} runs/s) |`,
  );
  console.log(
    `| workerd CPU per run, delivery included | ${sync.cpuMs === null ? "–" : `${fmt(sync.cpuMs, 3)} ms`} | ${async.cpuMs === null ? "–" : `${fmt(async.cpuMs, 3)} ms`} (${cpuRatio}) |`,
  );
  console.log(`| deliveries received | ${sync.received} | ${async.received} |`);
  if (sync.cpuMs && async.cpuMs)
    console.log(
      `\nCPU per async run with a webhook ÷ per synchronous run with a webhook: **${fmt(async.cpuMs / sync.cpuMs)}** (target ≤ 2.00: ${async.cpuMs / sync.cpuMs <= 2 ? "met" : "**missed**"}).`,
    );
  console.log(
    `\nAsync runs: ${distinct} distinct run ids; states ${states.map((s) => `${s.status} ${s.n}`).join(", ")}; ${terminal} of ${count} terminal; ` +
      `runs without exactly one delivered delivery record: **${wrongDeliveries}**.`,
  );
  if (terminal !== count || wrongDeliveries !== 0 || distinct !== count || async.received !== count) {
    throw new Error("bench: async runs did not each end in exactly one terminal state with exactly one delivery");
  }
}
