// What one call to each local binding costs the workerd process (CPU), measured inside a Worker in a
// loop, with the webhook delivery's own write pattern on the real schema (migrations/): the unit costs
// behind (e), (f) and the capacity model in docs/webhooks.md. The statements have the shape of
// src/webhooks/enqueue.ts (pending row) and src/webhooks/store.ts (claim, outcome with its trigger).
import { migrate, startWorker } from "./gateway.mjs";

const script = `
import { DurableObject } from "cloudflare:workers";
// A lane's own storage work for one delivery: its row stored by \`accept\` (one RPC per batch) and deleted when settled.
export class Lane extends DurableObject {
  constructor(state, env) {
    super(state, env);
    state.storage.sql.exec("CREATE TABLE IF NOT EXISTS lane_deliveries (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, message TEXT NOT NULL, due_at INTEGER NOT NULL, paused INTEGER NOT NULL DEFAULT 0, interruptions INTEGER NOT NULL DEFAULT 0)");
  }
  accept(messages) {
    for (const m of messages) this.ctx.storage.sql.exec("INSERT INTO lane_deliveries (id, message, due_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING seq", m.id, JSON.stringify(m), Date.now()).toArray();
    return messages.length;
  }
  settle(ids) {
    for (const id of ids) this.ctx.storage.sql.exec("DELETE FROM lane_deliveries WHERE id = ?", id);
    return ids.length;
  }
}
const MESSAGE = { v: 1, projectId: "proj_units", runId: "run_units", endpoint: "https://receiver.example/hook", createdAt: 0, bodyBytes: 60, body: { inline: JSON.stringify({ message: "hello from the bench upstream", value: 42 }) }, secret: null };
const LINE = { level: "info", message: "request", request_id: "req_01m88eqjx8khvj7t7b8jmq469h67rp", project_id: "proj_01m88eqjsgmfh3z1wv8b80yrpvvf0k", route: "/v4/:project_id/:app_name/:path", method: "GET", status: 200, duration_ms: 3, run_id: "run_01m88eqjx8nnpsknwsb2827cceshrr" };
const PENDING = "INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count, created_at, updated_at, sealed_secret, resent_from) VALUES (?, 'proj_units', ?, 'https://receiver.example/hook', 0, 0, 'pending', 0, ?, ?, NULL, NULL)";
const CLAIM = "INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count, created_at, updated_at, body, body_key, sealed_secret) SELECT ?1, 'proj_units', ?2, 'https://receiver.example/hook', 0, 2, 'pending', 1, ?3, ?3, '{}', NULL, NULL WHERE EXISTS (SELECT 1 FROM projects WHERE id = 'proj_units') ON CONFLICT (id) DO UPDATE SET attempt_count = attempt_count + 1, updated_at = excluded.updated_at, body_bytes = excluded.body_bytes, body = coalesce(body, excluded.body), body_key = coalesce(body_key, excluded.body_key), sealed_secret = coalesce(sealed_secret, excluded.sealed_secret) WHERE status = 'pending' AND attempt_count < 3 RETURNING attempt_count";
const OUTCOME = "INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_ms, outcome) SELECT ?1, 1, ?2, 204, NULL, 3, 'delivered' WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = ?1) ON CONFLICT DO NOTHING";
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const kind = url.pathname.slice(1);
    const prefix = url.searchParams.get("prefix");
    const from = Number(url.searchParams.get("from"));
    const n = Number(url.searchParams.get("n"));
    const id = (k) => prefix + k;
    const now = Date.now();
    const three = (i, sql) => [0, 1, 2].map((j) => env.DB.prepare(sql).bind(id(from + 3 * i + j), "run_" + id(from + 3 * i + j), now));
    for (let i = 0; i < n; i++) {
      if (kind === "pending") await env.DB.prepare(PENDING).bind(id(from + i), "run_" + id(from + i), now, now).run();
      else if (kind === "claim") await env.DB.prepare(CLAIM).bind(id(from + i), "run_" + id(from + i), now).all();
      else if (kind === "claims3") await env.DB.batch(three(i, CLAIM));
      else if (kind === "outcomes3") await env.DB.batch([0, 1, 2].map((j) => env.DB.prepare(OUTCOME).bind(id(from + 3 * i + j), now)));
      else if (kind === "send") await env.QUEUE.send({ id: id(from + i), body: "{}" }, { contentType: "json" });
      else if (kind === "post") await (await fetch(env.RECEIVER, { method: "POST", body: "{}" })).arrayBuffer();
      // One lane call per batch of 10 (as the consumer makes it), counted per delivery below.
      else if (kind === "accept10") await env.LANES.get(env.LANES.idFromName("units")).accept(Array.from({ length: 10 }, (_, j) => ({ ...MESSAGE, id: id(from + 10 * i + j) })));
      else if (kind === "settle10") await env.LANES.get(env.LANES.idFromName("units")).settle(Array.from({ length: 10 }, (_, j) => id(from + 10 * i + j)));
      else if (kind === "log") console.log({ ...LINE, duration_ms: i });
    }
    return new Response("ok");
  },
  async queue(batch) {
    for (const message of batch.messages) message.ack();
  },
};`;

/**
 * CPU µs per call of each kind (`calls` of each, after a warm-up); `cpuReader(url)` reads the serving
 * process's CPU ms. `pending` and `claim` are one statement in its own round trip; `claims3` and
 * `outcomes3` three in one D1 batch, as the consumer's group commit sends a batch of 3 deliveries.
 */
export async function measureUnits({ receiverUrl, cpuReader, calls = 600 }) {
  const mf = startWorker({
    script,
    d1Databases: { DB: "units-db" },
    queueProducers: { QUEUE: { queueName: "units" } },
    queueConsumers: { units: { maxBatchSize: 100, maxBatchTimeout: 1 } },
    durableObjects: { LANES: { className: "Lane", useSQLite: true } },
    bindings: { RECEIVER: receiverUrl },
  });
  try {
    const url = (await mf.ready).origin;
    const db = await mf.getD1Database("DB");
    await migrate(db);
    await db.prepare("INSERT INTO projects (id, name, created_at) VALUES ('proj_units', 'units', 0)").run();
    const cpu = cpuReader(url);
    if (!cpu) return null;
    const call = async (kind, prefix, from, n) => {
      const response = await fetch(`${url}/${kind}?prefix=${prefix}&from=${from}&n=${n}`);
      if (!response.ok) throw new Error(`bench units: ${kind}: ${response.status} ${await response.text()}`);
    };
    // Rows: `pending` writes 4 × calls; `claim` claims the first calls of them, `claims3` and
    // `outcomes3` the other 3 × calls, three at a time. The warm-up works on rows of its own.
    // [kind, first row, calls, rows per call, warm-up: [prefix, first row]]
    const plan = [
      ["pending", 0, 4 * calls, 1, ["wp", 0]],
      ["claim", 0, calls, 1, ["w", 0]],
      ["claims3", calls, calls, 3, ["w", 20]],
      ["outcomes3", calls, calls, 3, ["w", 20]],
      ["send", 0, calls, 1, ["w", 0]],
      ["post", 0, calls, 1, ["w", 0]],
      ["accept10", 0, calls / 10, 10, ["wa", 0]],
      ["settle10", 0, calls / 10, 10, ["wa", 0]],
      ["log", 0, calls, 1, ["w", 0]],
    ];
    await call("pending", "w", 0, 80);
    const units = {};
    for (const [kind, from, n, rowsPerCall, [warmPrefix, warmFrom]] of plan) {
      await call(kind, warmPrefix, warmFrom, 20);
      const before = cpu();
      const chunk = n / 10;
      for (let i = 0; i < 10; i++) await call(kind, "m", from + i * chunk * rowsPerCall, chunk);
      units[kind] = ((cpu() - before) / (n * (kind.endsWith("10") ? 10 : 1))) * 1000;
    }
    // The statements did what they stand for: every measured row claimed, and delivered by its outcome.
    const delivered = await db
      .prepare(
        "SELECT count(*) AS n FROM webhook_deliveries WHERE id LIKE 'm%' AND status = 'delivered' AND attempt_count = 1",
      )
      .first();
    if (delivered.n !== 3 * calls)
      throw new Error(`bench units: ${delivered.n} of ${3 * calls} rows claimed and delivered`);
    return units;
  } finally {
    await mf.dispose();
  }
}
