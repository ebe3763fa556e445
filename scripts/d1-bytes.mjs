// `npm run d1-bytes [-- --runs=50 --modes=sync,sync+webhook,wait,wait+webhook,async,async+webhook,websocket]
// [--store=d1]`:
// how many bytes each run leaves in the local D1 database, per run mode, measured black-box. The built
// Worker runs under Miniflare on persisted storage (scripts/bench/gateway.mjs, as the soak starts it),
// against a local echo app (HTTP and WebSocket) and a local webhook receiver. Per mode: one warm-up run,
// settled; D1 read (before); N runs, settled (every delivery received, every async run final, D1 still);
// D1 read again (after); (after − before) / N. A measurement, like `npm run bench`: it exits 0 whatever it
// finds, 1 only when the harness itself fails.
//
// What "bytes in D1" is here, two ways, independent of each other:
//   - pages: the database's used bytes, (page_count − freelist_count) × page_size. The D1 binding refuses
//     `PRAGMA page_count` and `PRAGMA freelist_count` (SQLITE_AUTH); every D1 answer carries the same figure
//     as `meta.size_after` (checked against the PRAGMAs of the persisted file, read-only with the sqlite3
//     CLI, when it is installed; both are printed). Not the file's size: the file grows in pages, keeps a
//     WAL beside it, and reuses free pages.
//   - rows: per table, `count(*)` and the sum of `length()` of every column (a number's length is its
//     text's, a blob's its bytes), read through the binding (`gateway.db`). Each table whose row count
//     changed is printed with its rows per run, so a reader sees which table grew.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, request as httpRequest } from "node:http";
import { cpus, loadavg, release, tmpdir, totalmem } from "node:os";
import { acceptOf, onShortFrames, textFrame } from "../test/global/websocket-frames.mjs";
import { join } from "node:path";
import { buildBundle, seedRunnableApp, startGateway } from "./bench/gateway.mjs";
import { listenOnLoopback, startPeer } from "./bench/peers.mjs";

// The machine has no internet: wrangler (the bundle's build) sends no telemetry.
process.env.WRANGLER_SEND_METRICS = "false";

export { buildBundle };

/** The tables every mode reports, grown or not; any other table is reported when its row count changed. */
export const TABLES_OF_INTEREST = ["async_runs", "webhook_deliveries", "webhook_attempts"];

/** The run modes, in the order they are measured. */
export const MODES = [
  { id: "sync", label: "sync (POST)" },
  { id: "sync+webhook", label: "sync + webhook", webhook: true },
  { id: "wait", label: "Prefer: wait=5 (answered in time)", wait: true },
  { id: "wait+webhook", label: "Prefer: wait=5 + webhook", wait: true, webhook: true },
  { id: "async", label: "async (?async=true)", async: true },
  { id: "async+webhook", label: "async + webhook", async: true, webhook: true },
  { id: "websocket", label: "WebSocket", webSocket: true },
];

const FINAL = new Set(["succeeded", "failed", "cancelled"]);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The app: answers every HTTP request with what it was sent (its method, path and body, as JSON), and
 * echoes every WebSocket text frame (RFC 6455 with no library, as test/global/peers.mjs does).
 */
async function startEchoApp() {
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = JSON.stringify({ echo: Buffer.concat(chunks).toString("utf8"), method: req.method, path: req.url });
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
      res.end(body);
    });
  });
  const sockets = new Set();
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  server.on("upgrade", (req, socket) => {
    const accept = acceptOf(req.headers["sec-websocket-key"]);
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    // Short masked frames only (the harness's own client sends them), echoed.
    onShortFrames(socket, (payload) => socket.write(textFrame(payload)));
    socket.on("error", () => undefined);
  });
  server.keepAliveTimeout = 60_000;
  const url = await listenOnLoopback(server);
  return {
    url,
    close: () =>
      new Promise((resolve) => {
        const closing = new Promise((r) => server.close(r));
        for (const socket of sockets) socket.destroy();
        closing.then(resolve);
      }),
  };
}

/** Sec-WebSocket-Accept of a handshake's key. */

/** A masked client frame (text, or close with no body): short payloads only. */
function clientFrame(opcode, payload = Buffer.alloc(0)) {
  const mask = randomBytes(4);
  const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]));
  return Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | payload.length]), mask, masked]);
}

/**
 * One WebSocket run, with no library (Node 20 has no WebSocket client): the upgrade through the
 * gateway's run path, one text frame echoed by the app, then a close both ways.
 */
function webSocketRun(url, token) {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: "GET",
      headers: {
        Authorization: `Bearer ${token}`,
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
      },
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error("d1-bytes: a WebSocket run did not finish within 10 s"));
    }, 10_000);
    req.on("response", (res) => {
      clearTimeout(timer);
      res.resume();
      reject(new Error(`d1-bytes: WebSocket run: ${res.statusCode}, not 101`));
    });
    req.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.on("upgrade", (res, socket) => {
      const runId = res.headers["x-run-id"] ?? null;
      let received = Buffer.alloc(0);
      let echoed = false;
      socket.on("data", (data) => {
        received = Buffer.concat([received, data]);
        if (!echoed && received.length >= 2 && received.length >= 2 + (received[1] & 0x7f)) {
          echoed = (received[0] & 0x0f) === 0x1 && received.subarray(2, 2 + (received[1] & 0x7f)).toString() === "ping";
          socket.write(clientFrame(0x8));
        }
      });
      socket.on("error", () => undefined);
      socket.on("close", () => {
        clearTimeout(timer);
        if (echoed) resolve({ status: 101, runId });
        else reject(new Error("d1-bytes: a WebSocket run's frame was not echoed"));
      });
      // The server's close frame ends it; a socket the far side leaves open is ended here.
      socket.on("end", () => socket.destroy());
      socket.write(clientFrame(0x1, Buffer.from("ping")));
    });
    req.end();
  });
}

/**
 * The database's used bytes as the D1 binding reports them (`meta.size_after`: (page_count −
 * freelist_count) × page_size), and the rows of every table: count and bytes.
 */
async function snapshot(db, tables) {
  const sizeAfter = (await db.prepare("SELECT 1").all()).meta.size_after;
  const byTable = {};
  for (const { name, columns } of tables) {
    const bytes = columns.map((c) => `coalesce(length("${c}"), 0)`).join(" + ");
    const row = await db.prepare(`SELECT count(*) AS n, coalesce(sum(${bytes}), 0) AS bytes FROM "${name}"`).first();
    byTable[name] = { rows: row.n, bytes: row.bytes };
  }
  return { usedBytes: sizeAfter, byTable };
}

/** The database's tables (not SQLite's or Cloudflare's own) and their columns. */
async function tablesOf(db) {
  const names = (
    await db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' ORDER BY name",
      )
      .all()
  ).results.map((r) => r.name);
  const tables = [];
  for (const name of names) {
    const columns = (await db.prepare("SELECT name FROM pragma_table_info(?)").bind(name).all()).results.map(
      (r) => r.name,
    );
    tables.push({ name, columns });
  }
  return tables;
}

/**
 * The PRAGMAs the binding refuses, read from the persisted D1 file with the sqlite3 CLI (read-only,
 * beside the running workerd; it reads the WAL too). Null without the CLI or the file.
 */
function filePages(persistDir) {
  const dir = join(persistDir, "d1", "miniflare-D1DatabaseObject");
  if (!existsSync(dir)) return null;
  const file = readdirSync(dir).find((name) => name.endsWith(".sqlite") && name !== "metadata.sqlite");
  if (!file) return null;
  try {
    const out = execFileSync(
      "sqlite3",
      ["-readonly", join(dir, file), "PRAGMA page_count; PRAGMA freelist_count; PRAGMA page_size;"],
      { stdio: ["ignore", "pipe", "ignore"], timeout: 5_000 },
    ).toString();
    const [pageCount, freelistCount, pageSize] = out.trim().split(/\s+/).map(Number);
    return { pageCount, freelistCount, pageSize, usedBytes: (pageCount - freelistCount) * pageSize };
  } catch {
    return null;
  }
}

/** `sql` on the SQLite file `file` with the sqlite3 CLI (read-only, beside the running workerd), its rows as JSON. */
const sqliteJson = (file, sql) =>
  JSON.parse(
    execFileSync("sqlite3", ["-readonly", "-json", file, sql], {
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 5_000,
    }).toString() || "[]",
  );

/**
 * What the Durable Objects hold, per class: each object's SQLite file under the persisted state, its used
 * bytes ((page_count − freelist_count) × page_size) and, per table, its rows and the sum of length() of
 * their columns (as `snapshot` reads D1), summed over the class's objects. Where a run's data lives
 * instead of D1 (delivery logs, keepers, ledgers, lanes). Null without the sqlite3 CLI.
 */
function objectState(persistDir) {
  const root = join(persistDir, "do");
  if (!existsSync(root)) return {};
  const classes = {};
  try {
    for (const dir of readdirSync(root)) {
      const files = readdirSync(join(root, dir)).filter(
        (name) => name.endsWith(".sqlite") && name !== "metadata.sqlite",
      );
      const state = { objects: files.length, usedBytes: 0, rowBytes: 0, byTable: {} };
      for (const name of files) {
        const file = join(root, dir, name);
        const [pages] = sqliteJson(
          file,
          "SELECT (SELECT page_count FROM pragma_page_count) AS pages, (SELECT freelist_count FROM pragma_freelist_count) AS free, (SELECT page_size FROM pragma_page_size) AS size",
        );
        state.usedBytes += (pages.pages - pages.free) * pages.size;
        const tables = sqliteJson(
          file,
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'",
        );
        for (const { name: table } of tables) {
          const columns = sqliteJson(file, `SELECT name FROM pragma_table_info('${table}')`).map((c) => c.name);
          const sum = columns.map((c) => `coalesce(sum(length("${c}")), 0)`).join(" + ") || "0";
          const [{ n, bytes }] = sqliteJson(file, `SELECT count(*) AS n, ${sum} AS bytes FROM "${table}"`);
          const t = (state.byTable[table] ??= { rows: 0, bytes: 0 });
          t.rows += n;
          t.bytes += bytes;
          state.rowBytes += bytes;
        }
      }
      // `<worker>-<Class>`: the class's name is what a reader knows it by.
      classes[dir.replace(/^.*-/, "")] = state;
    }
  } catch {
    return null;
  }
  return classes;
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Measures, per mode, the bytes and rows each run leaves in D1. Resolves with one entry per mode:
 * `usedBytesPerRun` (pages), `rowBytesPerRun` (every table's rows), `rowsPerRun` / `rowBytesPerRunByTable`
 * (the tables of interest and every table whose row count changed), and what settling saw.
 */
export async function d1Bytes({
  bundle,
  runs = 50,
  persistDir,
  modes = MODES.map((m) => m.id),
  settleTimeoutMs = 60_000,
  quietMs = 1_500,
  log = () => undefined,
  deliveryLogStore = "objects",
}) {
  const app = await startEchoApp();
  const receiver = await startPeer({ status: 204 });
  const gateway = await startGateway(bundle, {
    // No domain is checked: a resolver that is never asked.
    dnsResolverUrl: "http://127.0.0.1:9/dns-query",
    // Where deliveries are recorded: each project's logs (the default) or D1 (`--store=d1`).
    extraBindings: { DELIVERY_LOG_STORE: deliveryLogStore },
    sharedOptions: { resourcePersistencePath: persistDir, handleStructuredLogs: () => undefined },
  });
  try {
    const seed = await seedRunnableApp(gateway.url, app.url);
    const auth = { Authorization: `Bearer ${seed.token}` };
    const hook = `webhookEndpoint=${encodeURIComponent(`${receiver.url}/hook`)}`;
    const tables = await tablesOf(gateway.db);
    const pageSize = (await gateway.db.prepare("PRAGMA page_size").first()).page_size;

    /** One run of `mode`: its answer checked; what settling it waits for. */
    const runOnce = async (mode, i) => {
      if (mode.webSocket) {
        await webSocketRun(`${gateway.url}${seed.runPath}`, seed.token);
        return { statusUrl: null, handedOver: false };
      }
      const query = [mode.async ? "async=true" : null, mode.webhook ? hook : null].filter(Boolean).join("&");
      const headers = { ...auth, "Content-Type": "application/json" };
      if (mode.wait) headers.Prefer = "wait=5";
      const response = await fetch(`${gateway.url}${seed.runPath}${query ? `?${query}` : ""}`, {
        method: "POST",
        headers,
        body: JSON.stringify({ inputs: { prompt: `d1-bytes ${mode.id} ${i}` } }),
      });
      const text = await response.text();
      if (mode.async || response.status === 202) {
        if (response.status !== 202) throw new Error(`d1-bytes: ${mode.id} run: ${response.status} ${text}`);
        return { statusUrl: JSON.parse(text).status_url, handedOver: !mode.async };
      }
      if (response.status !== 200) throw new Error(`d1-bytes: ${mode.id} run: ${response.status} ${text}`);
      return { statusUrl: null, handedOver: false };
    };

    /** Every status URL final, every delivery received, then D1 unchanged for `quietMs`. */
    const settle = async (mode, started, receivedBefore) => {
      const deadline = Date.now() + settleTimeoutMs;
      const statuses = {};
      for (const { statusUrl } of started) {
        if (!statusUrl) continue;
        let status;
        for (;;) {
          const response = await fetch(statusUrl, { headers: auth });
          status = (await response.json()).status;
          if (FINAL.has(status) || Date.now() > deadline) break;
          await sleep(100);
        }
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
      const expected = mode.webhook ? started.length : 0;
      while (receiver.count - receivedBefore < expected && Date.now() < deadline) await sleep(100);
      let last = await snapshot(gateway.db, tables);
      let stillSince = Date.now();
      while (Date.now() < deadline) {
        await sleep(250);
        const now = await snapshot(gateway.db, tables);
        if (!same(now, last)) {
          last = now;
          stillSince = Date.now();
        } else if (Date.now() - stillSince >= quietMs) break;
      }
      return { state: last, statuses, received: receiver.count - receivedBefore, settled: Date.now() <= deadline };
    };

    const results = [];
    for (const id of modes) {
      const mode = MODES.find((m) => m.id === id);
      if (!mode) throw new Error(`d1-bytes: no mode ${id} (modes: ${MODES.map((m) => m.id).join(", ")})`);
      log(`${mode.id}: a warm-up run`);
      await settle(mode, [await runOnce(mode, -1)], receiver.count);
      const before = await snapshot(gateway.db, tables);
      const beforeFile = filePages(persistDir);
      const beforeObjects = objectState(persistDir);
      log(`${mode.id}: ${runs} runs`);
      const receivedBefore = receiver.count;
      const started = [];
      for (let i = 0; i < runs; i++) started.push(await runOnce(mode, i));
      const settled = await settle(mode, started, receivedBefore);
      const after = settled.state;
      const afterFile = filePages(persistDir);
      const afterObjects = objectState(persistDir);
      // Per class of Durable Object: what its objects gained per run (null: no sqlite3 CLI).
      const objectsPerRun =
        beforeObjects && afterObjects
          ? Object.fromEntries(
              Object.entries(afterObjects).map(([name, after]) => {
                const before = beforeObjects[name] ?? { usedBytes: 0, rowBytes: 0, byTable: {} };
                const rowsByTable = Object.fromEntries(
                  Object.entries(after.byTable)
                    .map(([table, t]) => [table, (t.rows - (before.byTable[table]?.rows ?? 0)) / runs])
                    .filter(([, n]) => n !== 0),
                );
                return [
                  name,
                  {
                    usedBytes: (after.usedBytes - before.usedBytes) / runs,
                    rowBytes: (after.rowBytes - before.rowBytes) / runs,
                    rowsByTable,
                  },
                ];
              }),
            )
          : null;
      const rowsPerRun = {};
      const rowBytesPerRunByTable = {};
      let rowBytes = 0;
      for (const { name } of tables) {
        const rows = after.byTable[name].rows - before.byTable[name].rows;
        const bytes = after.byTable[name].bytes - before.byTable[name].bytes;
        rowBytes += bytes;
        if (rows !== 0 || bytes !== 0 || TABLES_OF_INTEREST.includes(name)) {
          rowsPerRun[name] = rows / runs;
          rowBytesPerRunByTable[name] = bytes / runs;
        }
      }
      results.push({
        mode: mode.id,
        label: mode.label,
        runs,
        usedBytesPerRun: (after.usedBytes - before.usedBytes) / runs,
        rowBytesPerRun: rowBytes / runs,
        rowsPerRun,
        rowBytesPerRunByTable,
        before: { usedBytes: before.usedBytes, file: beforeFile },
        after: { usedBytes: after.usedBytes, file: afterFile },
        objectsPerRun,
        handedOver: started.filter((s) => s.handedOver).length,
        statuses: settled.statuses,
        deliveriesReceived: settled.received,
        settled: settled.settled,
      });
    }
    return { runs, pageSize, modes: results };
  } finally {
    await gateway.mf.dispose();
    await receiver.close();
    await app.close();
  }
}

const fmt = (n, digits = 1) => (Number.isInteger(n) ? String(n) : n.toFixed(digits));
const signed = (n) => (n > 0 ? `+${fmt(n, 2)}` : fmt(n, 2));

/** The measurement as Markdown: the table, then what each mode's settling saw. */
export function printD1Bytes({ runs, pageSize, modes }) {
  const grown = (m) =>
    Object.entries(m.rowsPerRun)
      .filter(([, n]) => n !== 0)
      .map(([table, n]) => `${table} ${signed(n)}`)
      .join(", ") || "none";
  const rows = [
    ["mode", "bytes per run (pages)", "row bytes per run", "rows per run by table"],
    ...modes.map((m) => [m.label, fmt(m.usedBytesPerRun), fmt(m.rowBytesPerRun), grown(m)]),
  ];
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  const line = (r) => `| ${r.map((cell, c) => cell.padEnd(widths[c])).join(" | ")} |`;
  console.log(`\n## Bytes each run leaves in the local D1 database (${runs} runs per mode, after a warm-up run)\n`);
  console.log(line(rows[0]));
  console.log(`| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`);
  for (const r of rows.slice(1)) console.log(line(r));
  console.log(
    `\nbytes per run (pages): the change in (page_count − freelist_count) × page_size (${pageSize}) over the ${runs} runs, ÷ ${runs}; ` +
      "row bytes: the change in the sum of length() of every column of every table, ÷ runs; rows: the change in count(*) per table, ÷ runs " +
      `(${TABLES_OF_INTEREST.join(", ")} always shown below; other tables when they changed).\n`,
  );
  const classes = [...new Set(modes.flatMap((m) => Object.keys(m.objectsPerRun ?? {})))].sort();
  if (classes.length > 0) {
    const cell = (m, c) => {
      const o = m.objectsPerRun?.[c];
      return o && (o.rowBytes !== 0 || o.usedBytes !== 0) ? `${fmt(o.rowBytes)} (${fmt(o.usedBytes)})` : "0";
    };
    const objectRows = [["mode", ...classes], ...modes.map((m) => [m.label, ...classes.map((c) => cell(m, c))])];
    const w = objectRows[0].map((_, c) => Math.max(...objectRows.map((r) => r[c].length)));
    const objectLine = (r) => `| ${r.map((text, c) => text.padEnd(w[c])).join(" | ")} |`;
    console.log(`\n## Bytes each run leaves in the Durable Objects, per class (${runs} runs per mode)\n`);
    console.log(objectLine(objectRows[0]));
    console.log(`| ${w.map((n) => "-".repeat(n)).join(" | ")} |`);
    for (const r of objectRows.slice(1)) console.log(objectLine(r));
    console.log(
      "\nrow bytes per run: the change in the sum of length() of every column of every table of the class's objects, ÷ runs; " +
        "in brackets, pages: the change in (page_count − freelist_count) × page_size of their SQLite files, ÷ runs (a new " +
        "object's schema counts there; a few runs may fit in pages already there). Read with the sqlite3 CLI, before any retention.\n",
    );
    for (const m of modes) {
      const grownTables = Object.entries(m.objectsPerRun ?? {})
        .flatMap(([c, o]) => Object.entries(o.rowsByTable).map(([t, n]) => `${c}.${t} ${signed(n)}`))
        .join(", ");
      if (grownTables) console.log(`- ${m.label}: rows per run ${grownTables}`);
    }
  }
  for (const m of modes) {
    const tables = Object.keys(m.rowsPerRun)
      .map((t) => `${t} ${signed(m.rowsPerRun[t])} rows / ${signed(m.rowBytesPerRunByTable[t])} B`)
      .join(", ");
    const file = (f) => (f ? `${f.pageCount} − ${f.freelistCount} pages` : "no sqlite3 CLI");
    const check =
      m.before.file && m.after.file
        ? m.before.file.usedBytes === m.before.usedBytes && m.after.file.usedBytes === m.after.usedBytes
          ? "binding and file agree"
          : "binding and file DISAGREE"
        : "file not read";
    const statuses = Object.entries(m.statuses)
      .map(([s, n]) => `${s} ${n}`)
      .join(", ");
    console.log(
      `- ${m.label}: ${tables}; used ${m.before.usedBytes} → ${m.after.usedBytes} B (file: ${file(m.before.file)} → ${file(m.after.file)}, ${check})` +
        (statuses ? `; status URLs: ${statuses}` : "") +
        (m.handedOver ? `; ${m.handedOver} waited run(s) handed over (202)` : "") +
        `; deliveries received ${m.deliveriesReceived}` +
        (m.settled ? "" : "; NOT SETTLED before the timeout"),
    );
  }
}

/** `npm run d1-bytes [-- --runs=50 --modes=<ids> --store=d1|objects]`. */
async function main() {
  const options = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=")));
  const runs = Number(options.runs ?? 50);
  const modes = options.modes ? options.modes.split(",") : undefined;
  const log = (...args) => console.error("d1-bytes:", ...args);
  const startedAt = new Date();
  const load = loadavg();
  const workdir = mkdtempSync(join(tmpdir(), "edge-gateway-d1-bytes-"));
  try {
    log("building the Worker bundle");
    // BENCH_BUNDLE: a bundle built beforehand (as `npm run bench` takes it).
    const bundle = process.env.BENCH_BUNDLE ?? buildBundle(join(workdir, "dist"));
    const deliveryLogStore = options.store ?? "objects";
    const result = await d1Bytes({ bundle, runs, modes, persistDir: join(workdir, "state"), log, deliveryLogStore });
    console.log(`# D1 bytes per run (delivery log in ${deliveryLogStore}), ${startedAt.toISOString()}`);
    console.log(
      `\nmachine: ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Linux ${release()}, ` +
        `Node ${process.version}; load average ${load.map((l) => l.toFixed(2)).join(" ")} at the start; ` +
        "the built Worker under Miniflare (workerd) on persisted local storage, loopback app and receiver.",
    );
    printD1Bytes(result);
    console.log(`\nended ${new Date().toISOString()}`);
  } catch (error) {
    log(`the harness failed: ${error.stack ?? error}`);
    process.exitCode = 1;
  } finally {
    rmSync(workdir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
