#!/usr/bin/env node
// The demo app of `npm run dev`: a tiny upstream the gateway runs, and a webhook receiver that checks
// the signatures of the deliveries it gets. Node only, no dependencies, no internet. One server holds
// what two demo apps are made of: the functions of a `cortex` app (run, stream, image) and the routes of
// a `custom` OpenAI-compatible server (/v1/…), as an LLM server such as vLLM or Ollama serves them.
//
//   node examples/sample-app/server.mjs            # listens on 127.0.0.1:8790
//   PORT=9000 WEBHOOK_SECRET=… node examples/sample-app/server.mjs
//
// POST|GET /run                  → {"greeting": "Hello, <name>!", "inputs": …, "query": …} (name from inputs.name, name or ?name=)
// POST|GET /slow                 → the same greeting after `ms` milliseconds (default 5000, at most 900000; from
//                                   ?ms=, inputs.ms or ms); a caller who leaves first closes the connection, and
//                                   the app says so in its log
// POST|GET /fail                 → the status asked for (?status=, inputs.status or status; 400–599, default 500)
//                                   with a JSON error; 429 and 503 carry Retry-After: 5
// POST|GET /stream               → with Accept: text/event-stream, the greeting word by word as server-sent
//                                   events (`data: {"token": …}`, one every TOKEN_MS, then `event: done`);
//                                   otherwise the whole text as JSON
// GET /image                     → image/png: a generated 64×64 picture whose colour follows ?name=
// GET /v1/models                 → OpenAI's model list (one model, "sample-echo")
// POST /v1/chat/completions      → a chat completion echoing the last user message; `"stream": true`
//                                   sends it as OpenAI's chunks (`data: {…}`, ending `data: [DONE]`)
// WebSocket /run                 → echoes text frames
// POST /webhook                  → logs each delivery and whether its X-Service-Webhook-Signature verifies
//
// It logs the deliveries it receives and the calls that end early (the caller hung up); VERBOSE=1 logs every call.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";
import { clearTimeout } from "node:timers";
import { deflateSync } from "node:zlib";

const port = Number(process.env.PORT ?? 8790);
const secret = process.env.WEBHOOK_SECRET ?? "demo-webhook-secret";
// The pace of streamed tokens: slow enough to watch them arrive one by one.
const TOKEN_MS = Number(process.env.TOKEN_MS ?? 150);
const VERBOSE = process.env.VERBOSE === "1";
const SLOW_DEFAULT_MS = 5000;
const SLOW_MAX_MS = 900_000;
const MODEL = "sample-echo";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks);
}

function verify(headers, body) {
  const id = headers["x-request-id"];
  const timestamp = headers["x-service-webhook-timestamp"];
  const signature = (headers["x-service-webhook-signature"] ?? "").replace(/^v1,/, "");
  if (!id || !timestamp || !signature) return "unsigned";
  const expected = createHmac("sha256", secret).update(`${id}.${timestamp}.`).update(body).digest("hex");
  const ok = signature.length === expected.length && timingSafeEqual(Buffer.from(signature), Buffer.from(expected));
  const age = Math.abs(Date.now() / 1000 - Number(timestamp));
  return ok ? (age <= 300 ? "valid" : "valid but stale") : "INVALID";
}

function sendJson(res, status, value) {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
}

/** Writes `tokens` one every TOKEN_MS as server-sent events made by `event`; stops early if the client hangs up. */
async function streamTokens(res, tokens, event, end) {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
  let gone = false;
  res.on("close", () => (gone = !res.writableFinished));
  for (const token of tokens) {
    if (gone)
      return console.log(
        `sample app: the caller left mid-stream; stream stopped (${res.req.headers["x-run-id"] ?? "no run id"})`,
      );
    res.write(event(token));
    await sleep(TOKEN_MS);
  }
  res.end(end);
}

// A PNG of its own making (signature, IHDR, one IDAT, IEND; RFC 2083), so the image route needs no file.
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
const crc32 = (bytes) => (bytes.reduce((c, b) => CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8), 0xffffffff) ^ 0xffffffff) >>> 0;
function pngChunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, "ascii");
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}
/** A 64×64 RGB picture: a diagonal gradient in a hue taken from `seed`. */
function png(seed) {
  const size = 64;
  const hue = createHash("sha256").update(seed).digest();
  const rows = Buffer.alloc(size * (1 + size * 3));
  for (let y = 0; y < size; y++) {
    const row = y * (1 + size * 3); // each row starts with filter type 0 (none)
    for (let x = 0; x < size; x++) {
      const t = (x + y) / (2 * size);
      for (let c = 0; c < 3; c++) rows[row + 1 + x * 3 + c] = Math.round(hue[c] * (1 - t) + 255 * t);
    }
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8 bits per channel, RGB, deflate, no filter, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk("IHDR", header),
    pngChunk("IDAT", deflateSync(rows)),
    pngChunk("IEND", Buffer.alloc(0)),
  ]);
}

/** The status asked for, as an app's own error: what a failing function answers. */
function fail(res, asked) {
  const status = asked === undefined ? 500 : Number(asked);
  if (!Number.isInteger(status) || status < 400 || status > 599)
    return sendJson(res, 400, { error: { message: `status must be a whole number from 400 to 599, not ${asked}` } });
  const headers = { "content-type": "application/json" };
  if (status === 429 || status === 503) headers["retry-after"] = "5";
  res
    .writeHead(status, headers)
    .end(JSON.stringify({ error: { message: `failed on purpose with ${status}`, status } }));
}

/** The greeting after `asked` ms, unless the caller leaves first (then the connection closes and it says so). */
function slow(req, res, asked, name) {
  const ms = asked === undefined ? SLOW_DEFAULT_MS : Number(asked);
  if (!Number.isInteger(ms) || ms < 0 || ms > SLOW_MAX_MS)
    return sendJson(res, 400, {
      error: { message: `ms must be a whole number from 0 to ${SLOW_MAX_MS}, not ${asked}` },
    });
  const started = Date.now();
  const timer = setTimeout(
    () => sendJson(res, 200, { greeting: `Hello, ${name}!`, slept_ms: Date.now() - started }),
    ms,
  );
  res.on("close", () => {
    if (res.writableFinished) return;
    clearTimeout(timer);
    console.log(
      `sample app: the caller left after ${Date.now() - started} ms of ${ms}; call ended (${req.headers["x-run-id"] ?? "no run id"})`,
    );
  });
}

/** OpenAI-compatible routes: what a `custom` app serving an LLM answers. */
async function openAi(req, res, url, body) {
  if (url.pathname === "/v1/models" && req.method === "GET") {
    return sendJson(res, 200, {
      object: "list",
      data: [{ id: MODEL, object: "model", created: 1_764_000_000, owned_by: "sample-app" }],
    });
  }
  if (url.pathname !== "/v1/chat/completions" || req.method !== "POST") {
    return sendJson(res, 404, {
      error: {
        message: `Unknown request URL: ${req.method} ${url.pathname}`,
        type: "invalid_request_error",
        param: null,
        code: null,
      },
    });
  }
  let request;
  try {
    request = JSON.parse(body.toString("utf8"));
  } catch {
    return sendJson(res, 400, {
      error: { message: "The body is not JSON.", type: "invalid_request_error", param: null, code: null },
    });
  }
  const last = [...(request.messages ?? [])].reverse().find((m) => m?.role === "user");
  const words = `You said: ${typeof last?.content === "string" ? last.content : ""}`.split(/(?= )/);
  const id = `chatcmpl-${createHash("sha256").update(String(Date.now())).digest("hex").slice(0, 12)}`;
  const base = { id, created: Math.floor(Date.now() / 1000), model: request.model ?? MODEL };
  if (request.stream !== true) {
    return sendJson(res, 200, {
      ...base,
      object: "chat.completion",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: words.join(""), refusal: null },
          logprobs: null,
          finish_reason: "stop",
        },
      ],
      usage: { prompt_tokens: 1, completion_tokens: words.length, total_tokens: 1 + words.length },
    });
  }
  const chunk = (delta, finish = null) =>
    `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
  await streamTokens(
    res,
    [{ role: "assistant", content: "" }, ...words.map((content) => ({ content }))],
    (delta) => chunk(delta),
    `${chunk({}, "stop")}data: [DONE]\n\n`,
  );
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url, `http://127.0.0.1:${port}`);
  const body = await readBody(req);
  if (url.pathname === "/webhook" && req.method === "POST") {
    console.log(
      `sample app: webhook ${req.headers["x-request-id"] ?? "(no id)"}: ${body.length} bytes, signature ${verify(req.headers, body)}`,
    );
    if (VERBOSE) console.log(`  ${body.toString("utf8").slice(0, 300)}`);
    res.writeHead(204).end();
    return;
  }
  if (VERBOSE)
    console.log(`sample app: run ${req.headers["x-run-id"] ?? ""}: ${req.method} ${url.pathname}${url.search}`);
  if (url.pathname.startsWith("/v1/")) return openAi(req, res, url, body);
  let inputs;
  try {
    inputs = body.length ? JSON.parse(body.toString("utf8")) : {};
  } catch {
    return sendJson(res, 400, { error: "body is not JSON" });
  }
  const args = inputs.inputs ?? inputs;
  /** A named argument: the body's (`{"inputs": {…}}` or flat) first, else the query's. */
  const arg = (key) => args[key] ?? url.searchParams.get(key) ?? undefined;
  const name = arg("name") ?? "world";
  if (url.pathname === "/fail") return fail(res, arg("status"));
  if (url.pathname === "/slow") return slow(req, res, arg("ms"), name);
  if (url.pathname === "/image") {
    const image = png(name);
    res.writeHead(200, { "content-type": "image/png", "content-length": image.length }).end(image);
    return;
  }
  if (url.pathname === "/stream") {
    const words = `Hello, ${name}! These words come one by one, as a model writes them.`.split(/(?= )/);
    if (!(req.headers.accept ?? "").includes("text/event-stream")) return sendJson(res, 200, { text: words.join("") });
    return streamTokens(res, words, (token) => `data: ${JSON.stringify({ token })}\n\n`, "event: done\ndata: {}\n\n");
  }
  if (url.pathname !== "/run" && url.pathname !== "/")
    return sendJson(res, 404, { error: `no function at ${url.pathname}` });
  sendJson(res, 200, {
    greeting: `Hello, ${name}!`,
    inputs: args,
    query: Object.fromEntries(url.searchParams),
    run_id: req.headers["x-run-id"] ?? null,
  });
});

// WebSocket echo (RFC 6455 handshake, short unfragmented text frames), so runs can be tried over a socket too.
server.on("upgrade", (req, socket) => {
  const accept = createHash("sha1")
    .update(`${req.headers["sec-websocket-key"]}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
    .digest("base64");
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
  );
  socket.on("data", (data) => {
    if ((data[0] & 0x0f) === 0x8) return socket.end(Buffer.from([0x88, 0]));
    const length = data[1] & 0x7f;
    if (length > 125) return;
    const mask = data.subarray(2, 6);
    const text = Buffer.from(data.subarray(6, 6 + length).map((b, i) => b ^ mask[i % 4])).toString("utf8");
    const reply = Buffer.from(`echo: ${text}`.slice(0, 125));
    socket.write(Buffer.concat([Buffer.from([0x81, reply.length]), reply]));
  });
  socket.on("error", () => undefined);
});

server.listen(port, "127.0.0.1", () =>
  console.log(
    `sample app on http://127.0.0.1:${server.address().port} (functions /run, /slow, /fail, /stream, /image; OpenAI-compatible /v1; webhooks at /webhook)`,
  ),
);
