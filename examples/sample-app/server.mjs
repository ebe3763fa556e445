#!/usr/bin/env node
// The demo app of `npm run dev`: a tiny upstream the gateway runs, and a webhook receiver that checks
// the signatures of the deliveries it gets. Node only, no dependencies, no internet.
//
//   node examples/sample-app/server.mjs            # listens on 127.0.0.1:8790
//   PORT=9000 WEBHOOK_SECRET=… node examples/sample-app/server.mjs
//
// POST|GET /run      → {"greeting": "Hello, <name>!", "inputs": …, "query": …} (name from inputs.name, name or ?name=)
// WebSocket /run     → echoes text frames
// POST /webhook      → logs each delivery and whether its X-Service-Webhook-Signature verifies
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const port = Number(process.env.PORT ?? 8790);
const secret = process.env.WEBHOOK_SECRET ?? "demo-webhook-secret";

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

const server = createServer(async (req, res) => {
  const url = new URL(req.url, `http://127.0.0.1:${port}`);
  const body = await readBody(req);
  if (url.pathname === "/webhook" && req.method === "POST") {
    console.log(`webhook ${req.headers["x-request-id"] ?? "(no id)"}: ${body.length} bytes, signature ${verify(req.headers, body)}`);
    console.log(`  ${body.toString("utf8").slice(0, 300)}`);
    res.writeHead(204).end();
    return;
  }
  let inputs;
  try {
    inputs = body.length ? JSON.parse(body.toString("utf8")) : {};
  } catch {
    res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ error: "body is not JSON" }));
    return;
  }
  const args = inputs.inputs ?? inputs;
  const name = args.name ?? url.searchParams.get("name") ?? "world";
  const answer = JSON.stringify({ greeting: `Hello, ${name}!`, inputs, query: Object.fromEntries(url.searchParams), run_id: req.headers["x-run-id"] ?? null });
  console.log(`run ${req.headers["x-run-id"] ?? ""}: ${req.method} ${url.pathname}${url.search}`);
  res.writeHead(200, { "content-type": "application/json" }).end(answer);
});

// WebSocket echo (RFC 6455 handshake, short unfragmented text frames), so runs can be tried over a socket too.
server.on("upgrade", (req, socket) => {
  const accept = createHash("sha1").update(`${req.headers["sec-websocket-key"]}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
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

server.listen(port, "127.0.0.1", () => console.log(`sample app on http://127.0.0.1:${port} (runs at /run, webhooks at /webhook)`));
