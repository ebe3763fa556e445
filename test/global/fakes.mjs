// Vitest globalSetup (runs in Node): one local HTTP server standing in for outside services the
// Worker calls, so tests exercise the real clients over real HTTP.
//   /client/v4/zones/{zone}/custom_hostnames…  Cloudflare for SaaS, with the documented envelope
//       {success, errors, messages, result}; ssl.status advances one step per read until "active".
//       Hostnames starting "cf-refused." get a 400 error envelope, "cf-down." a 502 HTML page.
//   /doh/{servfail|garbage|slow|http500|html|mismatch}  DoH endpoints that fail in each way.
import { createServer } from "node:http";
import { randomBytes, randomUUID } from "node:crypto";
import { TEST_CLOUDFLARE } from "../secrets.ts";

const CF_TOKEN = TEST_CLOUDFLARE.apiToken;
const CF_ZONE = TEST_CLOUDFLARE.zoneId;
const SSL_STEPS = ["pending_validation", "pending_issuance", "pending_deployment", "active"];

const hostnames = new Map(); // id -> custom hostname
const log = []; // "METHOD path" of every Cloudflare call, for tests to assert on

const envelope = (result, errors = []) => ({ success: errors.length === 0, errors, messages: [], result });

function customHostname(id) {
  const h = hostnames.get(id);
  const status = SSL_STEPS[Math.min(h.step, SSL_STEPS.length - 1)];
  const token = `${h.id}-token`;
  return {
    id: h.id,
    hostname: h.hostname,
    status: status === "active" ? "active" : "pending",
    ssl: {
      id: `ssl-${h.id}`,
      type: "dv",
      method: "http",
      status,
      ...(status === "pending_validation"
        ? {
            validation_records: [
              {
                status: "pending",
                http_url: `http://${h.hostname}/.well-known/acme-challenge/${token}`,
                http_body: `${token}.body`,
              },
            ],
          }
        : {}),
    },
    created_at: h.createdAt,
  };
}

function cloudflare(req, res, url, body) {
  const send = (status, payload) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(payload));
  };
  if (req.headers.authorization !== `Bearer ${CF_TOKEN}`)
    return send(403, envelope(null, [{ code: 10000, message: "Authentication error" }]));
  const match = /^\/client\/v4\/zones\/([^/]+)\/custom_hostnames(?:\/([^/]+))?$/.exec(url.pathname);
  if (!match || match[1] !== CF_ZONE)
    return send(
      404,
      envelope(null, [
        { code: 7003, message: "Could not route to /zones, perhaps your object identifier is invalid?" },
      ]),
    );
  const id = match[2];
  log.push(`${req.method} ${url.pathname}${url.search}`);
  if (!id && req.method === "POST") {
    const hostname = body?.hostname;
    if (typeof hostname !== "string" || body?.ssl?.method !== "http" || body?.ssl?.type !== "dv") {
      return send(400, envelope(null, [{ code: 1400, message: "Invalid request body" }]));
    }
    if (hostname.startsWith("cf-refused."))
      return send(400, envelope(null, [{ code: 1409, message: "The hostname is on a blocklist." }]));
    if (hostname.startsWith("cf-down.")) {
      res.writeHead(502, { "content-type": "text/html" });
      return res.end("<html><body>502 Bad Gateway</body></html>");
    }
    if ([...hostnames.values()].some((h) => h.hostname === hostname)) {
      return send(409, envelope(null, [{ code: 1406, message: "Duplicate custom hostname found." }]));
    }
    const created = { id: randomUUID(), hostname, step: 0, createdAt: new Date().toISOString() };
    hostnames.set(created.id, created);
    return send(201, envelope(customHostname(created.id)));
  }
  if (!id && req.method === "GET") {
    const wanted = url.searchParams.get("hostname");
    const found = [...hostnames.values()]
      .filter((h) => !wanted || h.hostname === wanted)
      .map((h) => customHostname(h.id));
    return send(200, {
      ...envelope(found),
      result_info: { page: 1, per_page: 20, count: found.length, total_count: found.length },
    });
  }
  if (id && !hostnames.has(id))
    return send(404, envelope(null, [{ code: 1436, message: "The custom hostname was not found." }]));
  if (id && req.method === "GET") {
    hostnames.get(id).step++;
    return send(200, envelope(customHostname(id)));
  }
  if (id && req.method === "DELETE") {
    hostnames.delete(id);
    return send(200, envelope({ id }));
  }
  return send(405, envelope(null, [{ code: 10405, message: "Method not allowed" }]));
}

function doh(req, res, mode, query) {
  const reply = (status, type, body) => {
    res.writeHead(status, { "content-type": type });
    res.end(body);
  };
  if (mode === "slow") return void setTimeout(() => reply(200, "application/dns-message", query), 10_000).unref();
  if (mode === "http500") return reply(500, "text/plain", "internal error");
  if (mode === "html") return reply(200, "text/html", "<html>captive portal</html>");
  if (mode === "garbage")
    return reply(200, "application/dns-message", Buffer.concat([query.subarray(0, 4), randomBytes(7)]));
  const answer = Buffer.from(query);
  answer[2] |= 0x80; // QR: a response
  if (mode === "servfail") answer[3] = (answer[3] & 0xf0) | 2;
  if (mode === "mismatch") answer[answer.length - 3] = 16; // the question's type becomes TXT
  return reply(200, "application/dns-message", answer);
}

export default async function setup(project) {
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const url = new URL(req.url, "http://fake");
      const raw = Buffer.concat(chunks);
      if (url.pathname === "/__log") {
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify(log));
      }
      const dohMode = /^\/doh\/([a-z0-9]+)$/.exec(url.pathname)?.[1];
      if (dohMode) return doh(req, res, dohMode, raw);
      let body;
      try {
        body = raw.length ? JSON.parse(raw.toString("utf8")) : undefined;
      } catch {
        body = undefined;
      }
      return cloudflare(req, res, url, body);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  project.provide("fakesUrl", `http://127.0.0.1:${server.address().port}`);
  return () => new Promise((resolve) => server.close(resolve));
}
