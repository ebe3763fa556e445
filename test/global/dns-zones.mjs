// Vitest globalSetup (runs in Node): a second, private instance of the DNS harness (knot behind dnsdist,
// scripts/dns-harness) whose zone `zones.test` the tests themselves write, through a small HTTP control
// server. The harness on 127.0.0.1:8053 may serve several checkouts and must never be restarted; this
// instance has its own HARNESS_DIR and ports, and is stopped (by its own PID files) when the run ends.
//
//   PUT    {control}/names/{name}  body [{"type": "CNAME", "data": "proxy.aws…"}, …]  sets the name's records
//   DELETE {control}/names/{name}                                                       removes them
// Each change rewrites the zone file with a higher SOA serial and reloads it with `knotc -b zone-reload`,
// which returns once knot serves the new zone, so the next query sees it.
import { execFile } from "node:child_process";
import { createSocket } from "node:dgram";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const HARNESS = fileURLToPath(new URL("../../scripts/dns-harness/", import.meta.url));
export const ZONE = "zones.test";
const TYPES = new Set(["A", "AAAA", "CNAME", "TXT", "CAA"]);

const run = (file, args, env) =>
  new Promise((resolve, reject) =>
    execFile(file, args, { env: { ...process.env, ...env }, timeout: 120_000 }, (error, stdout, stderr) =>
      error
        ? reject(new Error(`${file} ${args.join(" ")}: ${error.message}\n${stderr.slice(-2000)}`))
        : resolve(stdout.trim()),
    ),
  );

/** A port free for TCP and UDP on loopback right now (start.sh refuses a busy one, and we then try again). */
async function freePort() {
  const port = await new Promise((resolve, reject) => {
    const server = createTcpServer().once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
  await new Promise((resolve, reject) => {
    const socket = createSocket("udp4").once("error", reject);
    socket.bind(port, "127.0.0.1", () => socket.close(resolve));
  });
  return port;
}

function zoneFile(serial, names) {
  const lines = [
    `$ORIGIN ${ZONE}.`,
    "$TTL 1",
    `@ IN SOA ns1.${ZONE}. hostmaster.${ZONE}. ${serial} 3600 600 86400 1`,
    `@ IN NS ns1.${ZONE}.`,
    "ns1 IN A 127.0.0.1",
  ];
  for (const [name, records] of names) for (const r of records) lines.push(`${name}. IN ${r.type} ${r.data}`);
  return `${lines.join("\n")}\n`;
}

/** Starts the private harness; returns its DoH URL, the control server's URL and a stop function. */
export async function startZones() {
  const dir = mkdtempSync(join(tmpdir(), "dns-zones-"));
  const zonePath = join(dir, "zones.d", `${ZONE}.zone`);
  const names = new Map();
  let serial = 1;
  mkdirSync(join(dir, "zones.d"));
  writeFileSync(zonePath, zoneFile(serial, names));
  let doh;
  let env;
  for (let attempt = 1; !doh; attempt++) {
    env = { HARNESS_DIR: dir, AUTH_PORT: String(await freePort()), DOH_PORT: String(await freePort()), JSON_SHIM: "0" };
    try {
      doh = await run("bash", [join(HARNESS, "start.sh")], env);
    } catch (error) {
      if (attempt >= 3) throw error;
    }
  }
  // One change at a time: each rewrites the whole zone and waits for knot to load it.
  let queue = Promise.resolve();
  const change = (apply) =>
    (queue = queue.then(async () => {
      apply();
      writeFileSync(zonePath, zoneFile(++serial, names));
      await run("/usr/sbin/knotc", ["-c", join(dir, "knot.conf"), "-b", "zone-reload", `${ZONE}.`], env);
    }));

  const control = createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", async () => {
      const reply = (status, body) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      const name = /^\/names\/([a-z0-9._-]+)$/.exec(new URL(req.url, "http://zones").pathname)?.[1];
      if (!name || !(name === ZONE || name.endsWith(`.${ZONE}`))) return reply(404, { error: `names end in .${ZONE}` });
      try {
        if (req.method === "DELETE") {
          await change(() => names.delete(name));
          return reply(200, { ok: true });
        }
        const records = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        const bad =
          !Array.isArray(records) ||
          records.some((r) => !TYPES.has(r?.type) || typeof r.data !== "string" || /[\n\r]/.test(r.data));
        if (req.method !== "PUT" || bad)
          return reply(400, { error: "PUT a list of {type, data}; types A, AAAA, CNAME, TXT, CAA" });
        await change(() => names.set(name, records));
        reply(200, { ok: true });
      } catch (error) {
        reply(500, { error: String(error) });
      }
    });
  });
  await new Promise((resolve) => control.listen(0, "127.0.0.1", resolve));
  const stop = async () => {
    await new Promise((resolve) => control.close(resolve));
    await run("bash", [join(HARNESS, "stop.sh")], env).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  return { doh, control: `http://127.0.0.1:${control.address().port}`, stop };
}

export default async function setup(project) {
  const zones = await startZones();
  project.provide("zonesDohUrl", zones.doh);
  project.provide("zonesUrl", zones.control);
  return zones.stop;
}
