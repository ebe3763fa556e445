// The soak's flapping receiver and its outcome table, shared by the script and its Node test.
// Every delivery's fate is a pure function of its run id (in the body of every attempt, signed or not;
// a run has one delivery), so the expected end state of each delivery is known without watching it.
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { listenOnLoopback } from "../bench/peers.mjs";

/** What the receiver does on one attempt. */
export const ANSWERS = ["200", "404", "500", "302", "timeout", "garbage"];

/** The receiver's answer to attempt `n` (1-based) of the delivery of run `id`: it flaps from attempt to attempt. */
export function answerFor(id, attempt) {
  const digest = createHash("sha256").update(`${id}#${attempt}`).digest();
  return ANSWERS[digest[0] % ANSWERS.length];
}

/**
 * The spec's outcome table (section 7): 2xx delivered; 404, network errors, timeouts and non-2xx
 * outside 4xx/5xx (a 302 is not followed) retried; other 4xx and every 5xx final; 3 attempts in all.
 * `refused` deliveries go to a port nothing listens on: every attempt is a network error.
 */
export function expectedOutcome(id, refused = false) {
  for (let attempt = 1; attempt <= 3; attempt++) {
    const answer = refused ? "refused" : answerFor(id, attempt);
    if (answer === "200") return { status: "delivered", attempts: attempt };
    if (answer === "500") return { status: "failed", attempts: attempt };
  }
  return { status: "failed", attempts: 3 };
}

/** A loopback receiver answering as `answerFor` says. */
export async function startFlappingReceiver() {
  const seen = new Map();
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      let id = "";
      try {
        id = JSON.parse(Buffer.concat(chunks).toString("utf8")).run_id ?? "";
      } catch {
        // Not an envelope: counted under "".
      }
      const attempt = (seen.get(id) ?? 0) + 1;
      seen.set(id, attempt);
      const answer = answerFor(id, attempt);
      // Bytes that are not HTTP, then the connection closes: a network error to the gateway. (Closing
      // without a byte would let an HTTP client resend the request on a fresh connection by itself.)
      if (answer === "garbage") return req.socket.end("HTTP/1.1 \u00ff garbage\r\n\r\n");
      // Never answers: only the gateway's own timeout ends the attempt (the socket closes with the server).
      if (answer === "timeout") return;
      const status = Number(answer);
      res.writeHead(status, {
        "Content-Type": "application/json",
        ...(status === 302 ? { Location: "https://example.com/moved" } : {}),
      });
      res.end(JSON.stringify({ ok: status === 200 }));
    });
  });
  server.keepAliveTimeout = 60_000;
  return {
    url: await listenOnLoopback(server),
    /** Requests received per run id. */
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

/** A loopback port with nothing listening: connections to it are refused. */
export async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

/**
 * The same table applied to what the gateway recorded of each attempt (`status_code`, or an error):
 * for a delivery whose attempts the machine's load disturbed (an attempt that timed out though the
 * receiver meant to answer it, or that never reached the receiver), whose plan cannot be followed.
 */
export function outcomeOfTrail(trail) {
  for (let i = 0; i < Math.min(trail.length, 3); i++) {
    const status = trail[i].status_code;
    if (status !== null && status >= 200 && status < 300) return { status: "delivered", attempts: i + 1 };
    if (status !== null && status >= 400 && status < 600 && status !== 404)
      return { status: "failed", attempts: i + 1 };
  }
  return { status: "failed", attempts: 3 };
}
