// The front of `npm run dev`: a small HTTP proxy on the port people use (8787), in front of the
// gateway's own workerd. It does two things `wrangler dev`'s built-in proxy does not:
//
// 1. A caller who leaves reaches the Worker. workerd's HTTP server does not notice a client's FIN while a
//    request waits for its answer (curl --max-time, a browser's stop button), and wrangler's proxy
//    fetches the Worker without a signal, so under `wrangler dev` `request.signal` never fires before
//    the answer starts and a run whose caller gave up looks served. Cloudflare sees the hang-up; so
//    here, the front resets (TCP RST) its own connection to the Worker the moment its caller's goes,
//    which workerd does notice: `request.signal` fires and the gateway ends the app's call, as in production.
// 2. One line per request: time, status, method and path, how long until the answer ended (or the
//    caller left), the request's and run's ids, and whose failure a failed run was.
import { request as httpRequest, createServer } from "node:http";
import { STATUS_CODES } from "node:http";

/** How much of a problem+json answer is read (beside the caller's copy) to name the gateway's problem. */
const PROBLEM_PEEK_BYTES = 8192;

/**
 * Starts the front on `port`, on both loopback addresses (IPv4 and, where there is one, IPv6), forwarding to
 * the origin `target()` answers (it may wait: the Worker reloads). `print(text, line)` gets one line per
 * request, when its answer has ended (or its caller left), with the request's facts (`line.started`…).
 */
export async function startFront({ port, target, print, color = false }) {
  const servers = [];
  for (const host of ["127.0.0.1", "::1"]) {
    const server = createServer((req, res) => forward(req, res, { target, print, color }));
    server.on("upgrade", (req, socket, head) => upgrade(req, socket, head, target));
    server.on("clientError", (_error, socket) => socket.destroy());
    const listening = await new Promise((resolve) => {
      server.once("error", (error) => resolve(error));
      server.listen(Number(port), host, () => resolve(null));
    });
    if (listening === null) servers.push(server);
    else if (host === "127.0.0.1") throw listening; // IPv6 loopback may be absent; IPv4 must work
  }
  return {
    port: servers[0].address().port,
    close: () => Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve)))),
  };
}

async function forward(req, res, { target, print, color }) {
  const started = Date.now();
  const origin = await target();
  const line = { method: req.method, path: req.url, started, status: null, headers: {}, problem: null, left: null };
  let finished = false;
  const done = () => {
    if (finished) return;
    finished = true;
    print(formatLine(line, Date.now(), color), line);
  };
  const upstream = httpRequest(origin, {
    method: req.method,
    path: req.url,
    headers: headersOf(req.rawHeaders),
    agent: false, // a connection of its own, so resetting it touches no other request
  });
  // The caller left before the answer ended: reset the Worker's connection, so the runtime aborts the
  // request (`request.signal`) and cancels its body, as Cloudflare's edge does when a client goes.
  res.on("close", () => {
    if (res.writableFinished) return;
    line.left = line.status === null ? "before the answer" : "mid-answer";
    const socket = upstream.socket;
    if (socket && typeof socket.resetAndDestroy === "function") socket.resetAndDestroy();
    else upstream.destroy();
    done();
  });
  upstream.on("response", (answer) => {
    line.status = answer.statusCode;
    line.headers = {
      request: answer.headers["x-request-id"],
      run: answer.headers["x-run-id"],
      waited: answer.headers["preference-applied"] !== undefined,
      replayed: answer.headers["idempotent-replayed"] === "true",
    };
    res.writeHead(answer.statusCode, answer.statusMessage, answer.rawHeaders);
    // The gateway's own problems carry the request's id; peek at one to name its code (never an app's body).
    const peek = (answer.headers["content-type"] ?? "").startsWith("application/problem+json") ? [] : null;
    let peeked = 0;
    answer.on("data", (chunk) => {
      if (peek && peeked < PROBLEM_PEEK_BYTES) {
        peek.push(chunk);
        peeked += chunk.length;
      }
      // Each chunk at once: a stream's events reach the caller as the app writes them.
      if (!res.write(chunk)) answer.pause();
    });
    res.on("drain", () => answer.resume());
    answer.on("end", () => {
      if (peek) line.problem = problemOf(Buffer.concat(peek).toString("utf8"), line.headers.request);
      res.end(done);
    });
    answer.on("error", () => res.destroy());
  });
  upstream.on("error", (error) => {
    if (line.left) return; // our own reset
    line.status = 502;
    line.note = `dev: the gateway did not answer (${error.code ?? error.message}); is it reloading?`;
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain; charset=utf-8" });
    res.end(`${line.note}\n`, done);
  });
  // A request without a body (curl -X POST with no data) stays without one: piped, Node would send an
  // empty chunked body, and the gateway would see a body with no Content-Type.
  if (req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined) req.pipe(upstream);
  else {
    upstream.useChunkedEncodingByDefault = false;
    upstream.end();
  }
}

/**
 * The caller's headers as they came (repeated ones repeated), as an object: with an array Node would fix
 * the request's framing at once, before it knows whether a body follows.
 */
function headersOf(raw) {
  const headers = {};
  for (let i = 0; i < raw.length; i += 2) (headers[raw[i].toLowerCase()] ??= []).push(raw[i + 1]);
  // One value is a string (Node insists on it for Host).
  for (const [name, values] of Object.entries(headers)) if (values.length === 1) headers[name] = values[0];
  return headers;
}

/** A WebSocket (or any upgrade) is passed through as bytes both ways; it is not logged line by line. */
function upgrade(req, socket, head, target) {
  void target().then((origin) => {
    const upstream = httpRequest(origin, { method: req.method, path: req.url, headers: req.rawHeaders, agent: false });
    upstream.on("upgrade", (answer, upSocket, upHead) => {
      let raw = `HTTP/1.1 ${answer.statusCode} ${answer.statusMessage}\r\n`;
      for (let i = 0; i < answer.rawHeaders.length; i += 2)
        raw += `${answer.rawHeaders[i]}: ${answer.rawHeaders[i + 1]}\r\n`;
      socket.write(`${raw}\r\n`);
      if (upHead.length) socket.write(upHead);
      if (head.length) upSocket.write(head);
      upSocket.pipe(socket).pipe(upSocket);
      const end = () => (socket.destroy(), upSocket.destroy());
      socket.on("error", end).on("close", end);
      upSocket.on("error", end).on("close", end);
    });
    upstream.on("response", (answer) => {
      let raw = `HTTP/1.1 ${answer.statusCode} ${answer.statusMessage}\r\n`;
      for (let i = 0; i < answer.rawHeaders.length; i += 2)
        raw += `${answer.rawHeaders[i]}: ${answer.rawHeaders[i + 1]}\r\n`;
      socket.write(`${raw}\r\n`);
      answer.pipe(socket);
    });
    upstream.on("error", () => socket.destroy());
    upstream.end();
  });
}

/** The gateway's problem code, when the problem is the gateway's own (its `request_id` is this request's). */
export function problemOf(text, requestId) {
  try {
    const problem = JSON.parse(text);
    return problem && typeof problem.code === "string" && problem.request_id === requestId ? problem.code : null;
  } catch {
    return null;
  }
}

const PAINT = { red: 31, green: 32, yellow: 33, magenta: 35, dim: 2 };
const paint = (color, tone, text) => (color ? `\u001b[${PAINT[tone]}m${text}\u001b[0m` : text);
const clock = (at) => new Date(at).toISOString().slice(11, 19);

/**
 * One request as one line: `12:00:01 200 POST /v4/proj_…/hello-world/run 12 ms req_… run_…`, then what a
 * newcomer needs to read it: whose failure a failed run was, or that the caller left (and when).
 */
export function formatLine(line, now, color = false) {
  const ms = now - line.started;
  const status = line.status === null ? "---" : String(line.status);
  const isRun = Boolean(line.headers.run);
  let tone = line.status === null ? "dim" : line.status >= 500 ? "red" : line.status >= 400 ? "yellow" : "green";
  let why = "";
  if (line.left) {
    why = `caller left ${line.left}`;
    tone = "yellow";
  } else if (line.note) {
    why = line.note;
  } else if (isRun && line.status >= 400) {
    // A run's failure is the app's unless the answer is the gateway's own problem.
    if (line.problem) why = `gateway: ${line.problem}`;
    else {
      why = `app answered ${line.status} ${STATUS_CODES[line.status] ?? ""}`.trimEnd();
      tone = "magenta";
    }
  } else if (isRun && line.headers.replayed) {
    // A retry under an Idempotency-Key answers the key's run (its id is X-Run-Id): nothing was handed over.
    why = "Idempotency-Key: the key's run, the app not called again";
  } else if (isRun && line.status === 202) {
    why = line.headers.waited
      ? "handed over: the run goes on without its caller"
      : "accepted: the run goes on without its caller";
  } else if (line.problem) {
    why = line.problem;
  }
  const ids = [line.headers.request, line.headers.run].filter(Boolean).join(" ");
  const parts = [
    paint(color, "dim", clock(line.started)),
    paint(color, tone, status),
    `${line.method} ${line.path}`,
    `${ms} ms`,
    ids && paint(color, "dim", ids),
    why && paint(color, tone, why),
  ];
  return parts.filter(Boolean).join(" ");
}
