// Where a run's CPU goes: the built gateway under Miniflare with the inspector on, loaded with wrk while
// V8's sampling profiler runs, then self time by function (the bundle keeps function names).
//   node scripts/bench/profile-run.mjs [--seconds=3] [--path=fn/run|srv/png]
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildBundle, managementApi, SECRETS, startGateway } from "./gateway.mjs";
import { listenOnLoopback } from "./peers.mjs";
import { printProfile, profileWhile } from "./profile.mjs";
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
  const { profile, result: load } = await profileWhile(port, () =>
    wrk({ ...target, connections: 16, seconds: SECONDS }),
  );
  printProfile(profile, { units: load.rps * SECONDS, label: `${load.rps} req/s` });
} finally {
  await gw.mf.dispose();
  server.close();
  rmSync(dir, { recursive: true, force: true });
}
