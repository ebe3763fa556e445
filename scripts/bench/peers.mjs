// Loopback HTTP peers for the benchmark: an app upstream and a webhook receiver.
import { createServer } from "node:http";

/** Answers every request with a small JSON body after `delayMs`; counts requests. */
export async function startPeer({ delayMs = 0, status = 200 } = {}) {
  let count = 0;
  const waiters = [];
  const arrivals = [];
  const body = JSON.stringify({ message: "hello from the bench upstream", value: 42 });
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      arrivals.push(performance.now());
      const reply = () => {
        count++;
        res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
        res.end(body);
        for (const w of waiters.splice(0)) w();
      };
      if (delayMs > 0) setTimeout(reply, delayMs);
      else reply();
    });
  });
  server.keepAliveTimeout = 60_000;
  const url = await listenOnLoopback(server);
  return {
    url,
    get count() {
      return count;
    },
    /** When each request arrived (performance.now()), in order. */
    arrivals,
    /** Resolves once `n` requests in total have been answered. */
    async waitFor(n) {
      while (count < n) await new Promise((r) => waiters.push(r));
    },
    reset() {
      count = 0;
      arrivals.length = 0;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

/** Forwards every request to `target` (the DoH server) and counts them: the subrequests a Worker made. */
export async function startCountingProxy(target) {
  let count = 0;
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    count++;
    try {
      const url = new URL(req.url, target);
      const upstream = await fetch(`${target}${url.search}`, {
        method: req.method,
        headers: {
          "content-type": req.headers["content-type"] ?? "",
          accept: req.headers.accept ?? "application/dns-message",
        },
        body: req.method === "POST" ? Buffer.concat(chunks) : undefined,
      });
      const body = Buffer.from(await upstream.arrayBuffer());
      res.writeHead(upstream.status, {
        "Content-Type": upstream.headers.get("content-type") ?? "application/octet-stream",
      });
      res.end(body);
    } catch {
      res.writeHead(502).end();
    }
  });
  const url = await listenOnLoopback(server);
  return {
    url: `${url}/dns-query`,
    get count() {
      return count;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

/** Listens on an ephemeral loopback port; resolves to the server's base URL. */
export function listenOnLoopback(server) {
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${server.address().port}`));
  });
}
