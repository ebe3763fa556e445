// The soak's app: counts its calls per run id (the gateway's `X-Run-Id`) and per soak run (the `i` of
// the query), answers `{i, run_id}` after `?ms=` milliseconds, and notes whether each answer was sent
// whole or its connection was cut first (a caller's hang-up passed on, a deadline, a restart).
import { createServer } from "node:http";
import { listenOnLoopback } from "../bench/peers.mjs";

/** The answer the app gives run `runId` of soak run `i`: what its caller or its status URL must hold. */
export const answerOf = (i, runId) => ({ i, run_id: runId, answer: `soak answer ${i}` });

export async function startCountingApp() {
  /** run id → { i, calls, answered: the answer was written whole, cut: the connection closed first }. */
  const runs = new Map();
  /** soak run i → the run ids the app was called with for it. */
  const byIndex = new Map();
  let open = 0;
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://app");
    const i = Number(url.searchParams.get("i"));
    const ms = Number(url.searchParams.get("ms") ?? 0);
    const runId = String(req.headers["x-run-id"] ?? "");
    const seen = runs.get(runId) ?? { i, calls: 0, answered: false, cut: false };
    seen.calls++;
    runs.set(runId, seen);
    const ids = byIndex.get(i) ?? new Set();
    ids.add(runId);
    byIndex.set(i, ids);
    open++;
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      open--;
    };
    req.resume();
    const timer = setTimeout(() => {
      const body = JSON.stringify(answerOf(i, runId));
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
      res.end(body, () => {
        seen.answered = true;
        settle();
      });
    }, ms);
    res.on("close", () => {
      clearTimeout(timer);
      if (!seen.answered) seen.cut = true;
      settle();
    });
  });
  server.keepAliveTimeout = 60_000;
  const url = await listenOnLoopback(server);
  return {
    url,
    runs,
    byIndex,
    /** Calls the app is still answering. */
    get open() {
      return open;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
