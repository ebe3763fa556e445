// Real local peers for the workers tests, run by vitest in Node (globalSetup): an app upstream
// (HTTP and a raw WebSocket echo) and a webhook receiver that checks signatures with Node's own
// crypto and with the openssl CLI, an implementation independent of the code under test.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { gzipSync } from "node:zlib";
import { acceptOf, onShortFrames, textFrame } from "./websocket-frames.mjs";

/** Per receiver key: how to answer (in order, the last repeats) and what arrived. */
const scenarios = new Map();
const logs = new Map();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Upstream calls a test watches, by the key it chose (`?watch=`): whether the peer finished writing its
 * answer, whether the connection closed before that, and the release a held stream waits for.
 */
const watched = new Map();
function watch(key) {
  let entry = watched.get(key);
  if (!entry) {
    let release;
    let closed;
    entry = {
      arrived: false,
      finished: false,
      closed: false,
      chunks: 0,
      released: new Promise((resolve) => (release = resolve)),
      whenClosed: new Promise((resolve) => (closed = resolve)),
    };
    entry.release = release;
    entry.markClosed = () => {
      entry.closed = true;
      closed();
    };
    watched.set(key, entry);
  }
  return entry;
}
const watchState = (entry) => ({
  arrived: entry.arrived,
  finished: entry.finished,
  closed: entry.closed,
  chunks: entry.chunks,
  runId: entry.runId ?? null,
});

/** Upstream calls per `X-Run-Id`: how a test proves the app was called exactly once for a run. */
const callsByRun = new Map();

/** Deterministic bytes of a PNG image: the signature, then a counter pattern. */
function pngBytes(size) {
  const bytes = Buffer.alloc(Math.max(size, 8));
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(bytes);
  for (let i = 8; i < bytes.length; i++) bytes[i] = (i * 31) & 0xff;
  return bytes;
}

/**
 * An event stream of `events` events, `gap` ms apart; with `hold`, the first event is written and the
 * rest waits for `POST /release/{hold}`. With `watch`, the peer notes when it finished or the
 * connection closed first (a caller's hang-up reaching the app).
 */
async function eventStream(req, res, url, entry) {
  const events = Number(url.searchParams.get("events") ?? "3");
  const gap = Number(url.searchParams.get("gap") ?? "0");
  const hold = url.searchParams.get("hold");
  const first = Number(url.searchParams.get("firstAfter") ?? "0");
  // With `declared`, the stream's whole length is sent as Content-Length (a body of a declared length that stalls with `hold`).
  const length = url.searchParams.has("declared")
    ? {
        "content-length": Array.from({ length: events }, (_, i) => `data: {"i":${i}}\n\n`.length).reduce(
          (a, b) => a + b,
          0,
        ),
      }
    : {};
  res.writeHead(Number(url.searchParams.get("status") ?? "200"), {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-app-header": "kept",
    ...length,
  });
  res.flushHeaders();
  if (first) await sleep(first);
  for (let i = 0; i < events; i++) {
    if (res.destroyed || entry?.closed) return;
    res.write(`data: {"i":${i}}\n\n`);
    if (entry) entry.chunks++;
    if (i === 0 && hold) await watch(hold).released;
    else if (gap && i < events - 1) await sleep(gap);
  }
  if (entry) entry.finished = true;
  res.end();
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks);
}

function json(res, status, value, headers = {}) {
  const text = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

function checkSignatures(secret, headers, body) {
  const id = headers["x-request-id"];
  const ts = headers["x-service-webhook-timestamp"];
  const sig = headers["x-service-webhook-signature"] ?? "";
  const content = Buffer.concat([Buffer.from(`${id}.${ts}.`), body]);
  const expected = createHmac("sha256", secret).update(content).digest("hex");
  const got = sig.replace(/^v1,/, "");
  const node = got.length === expected.length && timingSafeEqual(Buffer.from(got), Buffer.from(expected));
  const opensslOut = execFileSync("openssl", ["dgst", "-sha256", "-hmac", secret, "-hex"], {
    input: content,
  }).toString();
  const openssl = opensslOut.trim().split(" ").pop() === got;
  // Standard Webhooks: key = base64-decoded part after whsec_, else the secret's bytes; signature base64.
  const key = secret.startsWith("whsec_") ? Buffer.from(secret.slice(6), "base64") : Buffer.from(secret);
  const std = createHmac("sha256", key)
    .update(Buffer.concat([Buffer.from(`${headers["webhook-id"]}.${headers["webhook-timestamp"]}.`), body]))
    .digest("base64");
  const standard = headers["webhook-signature"] === `v1,${std}`;
  return { node, openssl, standard };
}

async function receiver(req, res, key) {
  const body = await readBody(req);
  const scenario = scenarios.get(key) ?? { responses: [{ status: 200 }] };
  const log = logs.get(key) ?? [];
  logs.set(key, log);
  const entry = {
    at: Date.now(),
    method: req.method,
    headers: req.headers,
    bodyLength: body.length,
    bodySha256: createHash("sha256").update(body).digest("hex"),
    body: body.length <= 8 * 1024 * 1024 ? body.toString("utf8") : null,
    signatures: scenario.secret ? checkSignatures(scenario.secret, req.headers, body) : null,
  };
  log.push(entry);
  const answer = scenario.responses[Math.min(log.length - 1, scenario.responses.length - 1)];
  if (answer.delayMs) await sleep(answer.delayMs);
  if (answer.hangUp) {
    req.socket.destroy();
    return;
  }
  res.writeHead(answer.status, { "content-type": "application/json", ...(answer.headers ?? {}) });
  res.end(JSON.stringify({ ok: answer.status < 300 }));
}

async function upstream(req, res, url) {
  const runId = req.headers["x-run-id"];
  if (runId) callsByRun.set(runId, (callsByRun.get(runId) ?? 0) + 1);
  const key = url.searchParams.get("watch");
  const entry = key ? watch(key) : null;
  if (entry) entry.runId = runId ?? null;
  if (entry) {
    entry.arrived = true;
    // "close" on the response before it finished: the gateway dropped the connection.
    res.on("close", () => {
      if (!entry.finished) entry.markClosed();
    });
  }
  if (url.searchParams.has("events")) return eventStream(req, res, url, entry);
  const body = await readBody(req).catch(() => null);
  if (body === null) return;
  const delay = Number(url.searchParams.get("delay") ?? "0");
  if (delay) await sleep(delay);
  // `hold=key`: the answer waits for `POST /release/{key}` (a slow app whose moment the test chooses).
  const hold = url.searchParams.get("hold");
  if (hold) await Promise.race([watch(hold).released, new Promise((resolve) => res.on("close", resolve))]);
  if (res.destroyed) return;
  if (entry) entry.finished = true;
  const retryAfter = url.searchParams.get("retryAfter");
  const extra = retryAfter ? { "retry-after": retryAfter } : {};
  if (url.searchParams.has("gzip")) {
    // A JSON body of `gzip` bytes once decoded, sent compressed: its Content-Length is the wire length.
    const size = Number(url.searchParams.get("gzip"));
    const text = `{"pad":"${"x".repeat(Math.max(size - 10, 0))}"}`;
    const zipped = gzipSync(Buffer.from(text));
    const type = url.searchParams.get("type") ?? "application/json";
    res.writeHead(200, { "content-type": type, "content-encoding": "gzip", "content-length": zipped.length, ...extra });
    res.end(zipped);
    return;
  }
  if (url.searchParams.has("png")) {
    const bytes = pngBytes(Number(url.searchParams.get("png")));
    res.writeHead(200, {
      "content-type": "image/png",
      "content-length": bytes.length,
      "x-image-sha256": createHash("sha256").update(bytes).digest("hex"),
    });
    res.end(bytes);
    return;
  }
  if (url.searchParams.has("raw")) {
    // The request body back, byte for byte, with its type: what a custom app sees of an upload.
    res.writeHead(Number(url.searchParams.get("status") ?? "200"), {
      "content-type": req.headers["content-type"] ?? "application/octet-stream",
      "content-length": body.length,
      "x-body-sha256": createHash("sha256").update(body).digest("hex"),
      ...extra,
    });
    res.end(body);
    return;
  }
  if (url.searchParams.has("h")) {
    // An HTML answer with the headers the test names (`h=Name: value`, repeated): what an app may try.
    const headers = url.searchParams
      .getAll("h")
      .map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1).trim()]);
    res.writeHead(200, [["content-type", "text/html"], ...headers].flat());
    res.end("<script>document.title = 'from the app'</script>");
    return;
  }
  if (url.searchParams.has("text")) {
    res.writeHead(200, { "content-type": url.searchParams.get("type") ?? "text/plain" });
    res.end("not json");
    return;
  }
  if (url.searchParams.has("bytes")) {
    json(res, 200, { pad: "x".repeat(Number(url.searchParams.get("bytes"))) });
    return;
  }
  if (url.searchParams.has("empty")) {
    res.writeHead(Number(url.searchParams.get("status") ?? "204"));
    res.end();
    return;
  }
  const status = Number(url.searchParams.get("status") ?? "200");
  json(
    res,
    status,
    {
      method: req.method,
      path: url.pathname,
      query: [...url.searchParams],
      headers: req.headers,
      body: body.length ? body.toString("utf8") : null,
      bodyLength: body.length,
      bodySha256: createHash("sha256").update(body).digest("hex"),
    },
    extra,
  );
}

// A WebSocket echo with no library: the handshake of RFC 6455 and single, small text frames.
function upgrade(req, socket) {
  // A handshake the gateway must not follow, and one that never finishes (runs/sync/handshake.ts).
  if (req.url.startsWith("/upstream/ws-redirect")) {
    // `Connection: close`: a client must not reuse a connection this peer ends after the answer.
    socket.end("HTTP/1.1 302 Found\r\nLocation: /upstream/ws\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    return;
  }
  if (req.url.startsWith("/upstream/ws-stall")) {
    socket.on("error", () => undefined);
    return;
  }
  const accept = acceptOf(req.headers["sec-websocket-key"]);
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nX-Seen-Run-Id: ${req.headers["x-run-id"] ?? ""}\r\n\r\n`,
  );
  const runId = req.headers["x-run-id"] ?? "";
  const authorization = req.headers.authorization ?? "";
  // Tests send short frames only.
  onShortFrames(socket, (payload) => {
    const reply = Buffer.from(JSON.stringify({ echo: payload.toString("utf8"), run_id: runId, authorization }));
    socket.write(textFrame(reply));
  });
  socket.on("error", () => undefined);
}

export default async function setup(project) {
  const handle = async (req, res) => {
    const url = new URL(req.url, "http://peer");
    const [, area, key] = url.pathname.split("/");
    try {
      if (area === "upstream") return await upstream(req, res, url);
      if (area === "hooks") return await receiver(req, res, key);
      if (area === "scenarios" && req.method === "POST") {
        scenarios.set(key, JSON.parse((await readBody(req)).toString("utf8")));
        logs.set(key, []);
        return json(res, 200, { ok: true });
      }
      if (area === "log") return json(res, 200, { requests: logs.get(key) ?? [] });
      // A watched upstream call: release its held stream, read its state, or wait (up to 10 s) until its connection closed.
      if (area === "release" && req.method === "POST") {
        watch(key).release();
        return json(res, 200, watchState(watch(key)));
      }
      if (area === "watch") return json(res, 200, watchState(watch(key)));
      if (area === "calls") return json(res, 200, { calls: callsByRun.get(key) ?? 0 });
      if (area === "closed") {
        const entry = watch(key);
        await Promise.race([entry.whenClosed, sleep(10_000)]);
        return json(res, 200, watchState(entry));
      }
      json(res, 404, { error: "no such peer route" });
    } catch (error) {
      json(res, 500, { error: String(error) });
    }
  };
  const server = createServer(handle);
  server.on("upgrade", upgrade);
  // Idle connections stay open longer than any test run: a server closing one while workerd reuses it
  // would fail a request at random.
  server.keepAliveTimeout = 120_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  // The same receivers on more origins: a project's deliveries to another origin go to another lane.
  const [other, ...more] = await Promise.all(
    Array.from({ length: 4 }, async () => {
      const s = createServer(handle);
      s.keepAliveTimeout = 120_000;
      await new Promise((resolve) => s.listen(0, "127.0.0.1", resolve));
      return s;
    }),
  );

  // A port nothing listens on: connections are refused, like a receiver that is down.
  const closed = createServer();
  await new Promise((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const downPort = closed.address().port;
  await new Promise((resolve) => closed.close(resolve));

  project.provide("peerUrl", `http://127.0.0.1:${port}`);
  project.provide("downUrl", `http://127.0.0.1:${downPort}`);
  project.provide("peerOtherUrl", `http://127.0.0.1:${other.address().port}`);
  project.provide("peerMoreUrls", more.map((s) => `http://127.0.0.1:${s.address().port}`).join(","));
  // Every socket either server accepted, upgraded ones included: `closeAllConnections` knows only the
  // HTTP connections, and a WebSocket left half-open (the redirect and stall peers end or keep theirs)
  // held `close` — and with it vitest's exit — forever.
  const sockets = new Set();
  for (const s of [server, other, ...more]) {
    s.on("connection", (socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
  }
  return async () => {
    const closing = [server, other, ...more].map((s) => new Promise((resolve) => s.close(resolve)));
    for (const socket of sockets) socket.destroy();
    await Promise.all(closing);
  };
}
