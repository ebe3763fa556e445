// The burst's receiver as a process of its own: `node burst-receiver.mjs <answerMs> <retryEvery>`
// answers every request after <answerMs>, 200, or for every <retryEvery>-th request a 404 (0: never).
// It prints its base URL on its first line. The burst runs it on the core wrk gets (the customer's
// backend is not the gateway's: sharing the gateway's core would charge its work to the lane).
import { createServer } from "node:http";
import { listenOnLoopback } from "./peers.mjs";

const [answerMs, retryEvery] = process.argv.slice(2).map(Number);
let n = 0;
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    n++;
    const status = retryEvery > 0 && n % retryEvery === 0 ? 404 : 200;
    setTimeout(() => res.writeHead(status, { "Content-Type": "text/plain" }).end("ok"), answerMs);
  });
});
server.keepAliveTimeout = 60_000;
console.log(await listenOnLoopback(server));
process.on("SIGTERM", () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
