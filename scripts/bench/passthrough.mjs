// The baseline Worker (b): forwards every request to the upstream and returns its answer untouched.
// Whatever the gateway costs is measured against this, in the same runtime. With `limiter`, the floor
// (b'): the same plus one call of the run's rate-limit binding (RATE_LIMIT_RUNS, keyed by the path's
// project segment as a run is), since the local runtime's stand-in for that binding costs more than
// the rest of a run and is not what production pays; the gateway is compared with both.
const LIMIT = `
    const limited = await env.RATE_LIMIT_RUNS.limit({ key: url.pathname.split("/")[2] ?? "" });
    if (!limited.success) return new Response("rate limited", { status: 429 });`;

// With \`readInJs\`, the body is not handed on as the runtime gives it but read in JavaScript, as the
// gateway's silence watch must (byob reads into a reused 256 KiB buffer, each chunk written into an
// IdentityTransformStream, nothing else done): what the runtime itself charges for any JavaScript that
// sees a stream's bytes.
const READ_IN_JS = `
    if (!answer.body) return answer;
    const pipe = new IdentityTransformStream();
    const writer = pipe.writable.getWriter();
    (async () => {
      const reader = answer.body.getReader({ mode: "byob" });
      let buffer = new ArrayBuffer(256 * 1024);
      for (;;) {
        const { done, value } = await reader.read(new Uint8Array(buffer));
        if (done) break;
        buffer = value.buffer;
        await writer.write(value);
      }
      await writer.close();
    })().catch((error) => writer.abort(error).catch(() => {}));
    return new Response(pipe.readable, answer);`;

export const passthroughScript = (upstream, { limiter = false, readInJs = false } = {}) => `
const UPSTREAM = ${JSON.stringify(upstream)};
export default {
  async fetch(request, env) {
    const url = new URL(request.url);${limiter ? LIMIT : ""}
    const answer = await fetch(UPSTREAM + url.pathname + url.search, { method: request.method, headers: request.headers, body: request.body });${readInJs ? READ_IN_JS : ""}
    return answer;
  },
};
`;

// The floor of a recorded, delivered webhook: the least any design must do. On the caller's invocation,
// the baseline plus one durable write before the upstream call (the delivery is on record whatever
// happens to the run) and one queue send after it, in waitUntil as the gateway does (the caller does not
// wait for it). Its consumer, for each message: signs the body (HMAC-SHA256 over id.timestamp.body, as a
// delivery is signed), POSTs it to the receiver, and records the outcome in one durable write. The
// durable write is the gateway's own kind (issue 41 Must 7): a call of a Durable Object with SQLite
// storage, one of 8 per project as its delivery logs are (src/webhooks/log.ts), not D1. No lanes, no
// attempt count, no retries, no secret to open: what (e) does beyond this is its price for those. Like
// (b') it makes one call of the run's rate-limit binding, as (e) does.
export const floorScript = (upstream, receiver) => `
import { DurableObject } from "cloudflare:workers";
export class FloorLog extends DurableObject {
  constructor(state, env) {
    super(state, env);
    state.storage.sql.exec("CREATE TABLE IF NOT EXISTS deliveries (id TEXT PRIMARY KEY, at INTEGER NOT NULL, status TEXT NOT NULL, status_code INTEGER, duration_ms INTEGER)");
  }
  record(id, at) {
    this.ctx.storage.sql.exec("INSERT INTO deliveries (id, at, status) VALUES (?, ?, 'pending')", id, at);
  }
  settle(id, status, statusCode, durationMs) {
    this.ctx.storage.sql.exec("UPDATE deliveries SET status = ?, status_code = ?, duration_ms = ? WHERE id = ?", status, statusCode, durationMs, id);
  }
}
// A delivery's log: one of 8, named from its id.
const logOf = (env, id) => env.LOG.get(env.LOG.idFromName(String(parseInt(id.slice(-2), 16) % 8)));
const UPSTREAM = ${JSON.stringify(upstream)};
const RECEIVER = ${JSON.stringify(receiver)};
const encoder = new TextEncoder();
let key;
const hex = (bytes) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
async function deliver(env, { id, body }) {
  key ??= await crypto.subtle.importKey("raw", encoder.encode("floor-secret"), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = await crypto.subtle.sign("HMAC", key, encoder.encode(id + "." + timestamp + "." + body));
  const started = Date.now();
  const response = await fetch(RECEIVER, {
    method: "POST",
    headers: { "Content-Type": "application/json", "webhook-id": id, "webhook-timestamp": String(timestamp), "webhook-signature": "v1," + hex(signature) },
    body,
  });
  await response.body?.cancel();
  await logOf(env, id).settle(id, response.ok ? "delivered" : "failed", response.status, Date.now() - started);
}
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const id = crypto.randomUUID();${LIMIT}
    await logOf(env, id).record(id, Date.now());
    const response = await fetch(UPSTREAM + url.pathname + url.search, { method: request.method, headers: request.headers, body: request.body });
    const body = await response.text();
    ctx.waitUntil(env.QUEUE.send({ id, body }, { contentType: "json" }));
    return new Response(body, { status: response.status, headers: response.headers });
  },
  async queue(batch, env) {
    // Six at a time, as a lane has at most six deliveries in progress (Workers' 6 connections).
    let next = 0;
    await Promise.all(Array.from({ length: 6 }, async () => {
      while (next < batch.messages.length) {
        const message = batch.messages[next++];
        await deliver(env, message.body);
        message.ack();
      }
    }));
  },
};
`;
