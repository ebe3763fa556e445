// Where a run's CPU goes: the built gateway under Miniflare with the inspector on, loaded with wrk while
// V8's sampling profiler runs, then self time by function (the bundle keeps function names).
//   node scripts/bench/profile-run.mjs [--seconds=3] [--path=fn/run|srv/png]
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildBundle, managementApi, SECRETS, startGateway } from "./gateway.mjs";
import { listenOnLoopback } from "./peers.mjs";
import { wrk } from "./wrk.mjs";

const options = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=")));
const SECONDS = Number(options.seconds ?? 3);
const PATH = options.path ?? "fn/run";
const BODY = JSON.stringify({ message: "hello from the bench upstream", value: 42 });
const PNG = Buffer.alloc(16 * 1024, 0x42);
const server = createServer((req, res) => {
  req.resume();
  if (req.url.endsWith("/png"))
    return void res.writeHead(200, { "Content-Type": "image/png", "Content-Length": PNG.length }).end(PNG);
  res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(BODY) }).end(BODY);
});
server.keepAliveTimeout = 60_000;
const appUrl = await listenOnLoopback(server);
const dir = mkdtempSync(join(tmpdir(), "profile-run-"));
const port = 9300 + Math.floor(Math.random() * 500);
const gw = await startGateway(buildBundle(join(dir, "dist")), {
  sharedOptions: { inspectorPort: port, handleStructuredLogs: () => undefined },
});
try {
  const call = managementApi(gw.url);
  const { project_id } = await call(SECRETS.ADMIN_TOKEN, "POST", "/projects", { name: "profile" });
  const { token } = await call(SECRETS.ADMIN_TOKEN, "POST", `/projects/${project_id}/service-accounts`, {
    name: "p",
    expires_at: new Date(Date.now() + 864e5).toISOString(),
  });
  for (const [name, runtime] of [
    ["fn", "cortex"],
    ["srv", "custom"],
  ]) {
    const { app_id } = await call(token, "POST", `/projects/${project_id}/apps`, {
      name,
      region: "us-east-1",
      runtime,
    });
    const { build_id } = await call(token, "POST", `/projects/${project_id}/apps/${app_id}/builds`);
    await call(token, "PATCH", `/projects/${project_id}/apps/${app_id}/builds/${build_id}`, { status: "building" });
    await call(token, "PATCH", `/projects/${project_id}/apps/${app_id}/builds/${build_id}`, {
      status: "succeeded",
      origin_url: appUrl,
    });
  }
  const target = { url: `${gw.url}/v4/${project_id}/${PATH}`, headers: { Authorization: `Bearer ${token}` } };
  await wrk({ ...target, connections: 16, seconds: 1 });
  const list = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
  const ws = new WebSocket(
    list.find((t) => /gateway/.test(t.id ?? t.title ?? "") || /gateway/.test(t.webSocketDebuggerUrl))
      ?.webSocketDebuggerUrl ?? list[0].webSocketDebuggerUrl,
  );
  await new Promise((r) => ws.addEventListener("open", r));
  let id = 0;
  const pending = new Map();
  ws.addEventListener("message", (e) => {
    const m = JSON.parse(e.data);
    if (m.id && pending.has(m.id)) pending.get(m.id)(m.result);
  });
  const send = (method, params = {}) =>
    new Promise((r) => (pending.set(++id, r), ws.send(JSON.stringify({ id, method, params }))));
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 50 });
  await send("Profiler.start");
  const load = await wrk({ ...target, connections: 16, seconds: SECONDS });
  const { profile } = await send("Profiler.stop");
  ws.close();
  const self = new Map();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const counts = new Map();
  for (const s of profile.samples) counts.set(s, (counts.get(s) ?? 0) + 1);
  const total = profile.samples.length;
  for (const [nodeId, n] of counts) {
    const f = byId.get(nodeId).callFrame;
    const key = `${f.functionName || "(anonymous)"} ${f.url.split("/").pop()}:${f.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + n);
  }
  const perRun = (n) => ((n / total) * ((profile.endTime - profile.startTime) / 1000)) / (load.rps * SECONDS);
  console.log(
    `${load.rps} req/s; ${total} samples over ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s; self time per run (ms), top 40:`,
  );
  for (const [key, n] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 40))
    console.log(`${perRun(n).toFixed(4)}  ${((n / total) * 100).toFixed(1)}%  ${key}`);
} finally {
  await gw.mf.dispose();
  server.close();
  rmSync(dir, { recursive: true, force: true });
}
