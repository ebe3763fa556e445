// What one call to each local binding costs the workerd process (CPU), measured inside a Worker in a
// loop: the unit costs behind (e), (f) and the capacity model in docs/webhooks.md.
import { convertV4MiniflareOptions, Miniflare } from "miniflare";

const script = `
const UPSERT = "INSERT INTO t (id, n) VALUES (?, 1) ON CONFLICT(id) DO UPDATE SET n = n + 1 RETURNING n";
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n"));
    const kind = url.pathname.slice(1);
    for (let i = 0; i < n; i++) {
      const id = crypto.randomUUID();
      if (kind === "statement") await env.DB.prepare(UPSERT).bind(id).all();
      else if (kind === "batch3") await env.DB.batch([1, 2, 3].map((j) => env.DB.prepare(UPSERT).bind(id + j)));
      else if (kind === "send") await env.QUEUE.send({ id, body: "{}" }, { contentType: "json" });
      else if (kind === "post") await (await fetch(env.RECEIVER, { method: "POST", body: "{}" })).arrayBuffer();
    }
    return new Response("ok");
  },
  async queue(batch) {
    for (const message of batch.messages) message.ack();
  },
};`;

/** CPU µs per call of each kind, `calls` calls each after a warm-up; `cpuReader(url)` reads the serving process's CPU ms. */
export async function measureUnits({ compatibilityDate, receiverUrl, cpuReader, calls = 1000 }) {
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      host: "127.0.0.1",
      port: 0,
      modules: true,
      script,
      compatibilityDate,
      d1Databases: { DB: "units-db" },
      queueProducers: { QUEUE: { queueName: "units" } },
      queueConsumers: { units: { maxBatchSize: 100, maxBatchTimeout: 1 } },
      bindings: { RECEIVER: receiverUrl },
    }),
  );
  try {
    const url = (await mf.ready).origin;
    await (await mf.getD1Database("DB")).prepare("CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL)").run();
    const cpu = cpuReader(url);
    if (!cpu) return null;
    const units = {};
    for (const kind of ["statement", "batch3", "send", "post"]) {
      await (await fetch(`${url}/${kind}?n=20`)).text();
      const before = cpu();
      for (let i = 0; i < 10; i++) await (await fetch(`${url}/${kind}?n=${calls / 10}`)).text();
      units[kind] = ((cpu() - before) / calls) * 1000;
    }
    return units;
  } finally {
    await mf.dispose();
  }
}
