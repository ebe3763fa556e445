// `npm run dev`: local secrets on first run, local D1 migrations, the sample app (an upstream and a
// webhook receiver on 127.0.0.1:8790), the gateway in workerd with local D1, Queues, R2, Durable Objects
// and Cron (`/__scheduled` fires the cron) behind a small front on the port (scripts/dev/front.mjs: it
// passes a caller's hang-up on to the Worker and prints one line per request), a seeded demo project,
// then one closing banner with what to do next.
//
// The gateway runs through wrangler's own dev environment (the API `wrangler dev` is built on: the same
// configuration, bundling, bindings, local state in .wrangler/ and reload on change), without its proxy:
// that proxy would hide a caller's hang-up from the Worker (scripts/dev/front.mjs says why).
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { startFront } from "./dev/front.mjs";
import { formatLog, MIGRATE_ENV, migrationsSummary } from "./dev/logs.mjs";

// CLOUDFLARE_CF_FETCH_ENABLED=false: wrangler would fetch request.cf's sample data from
// workers.cloudflare.com on every start (a stack trace each time without internet); the gateway reads
// nothing from request.cf, so the built-in placeholder serves as well.
const env = { CLOUDFLARE_CF_FETCH_ENABLED: "false", ...process.env, WRANGLER_SEND_METRICS: "false" };
Object.assign(process.env, env); // wrangler's dev environment runs in this process
// In this process only: the local runtime's own info lines (`[wrangler:info] QUEUE domain-validations 1/1`,
// one per queue batch) follow wrangler's logger level, not the dev environment's `logLevel`; the front
// already prints each request, and warnings and errors still come (`WRANGLER_LOG=info npm run dev`
// brings those lines back). The children get `env`, without it.
process.env.WRANGLER_LOG ??= "warn";
const port = process.env.PORT ?? "8787";
const samplePort = process.env.SAMPLE_APP_PORT ?? "8790";
const base = `http://localhost:${port}`;
const color = process.stdout.isTTY && !process.env.NO_COLOR;
const say = (text) => process.stdout.write(`${text}\n`);

/** Whether something already answers on 127.0.0.1:`port` (another `npm run dev`, most likely). */
const busy = (port) =>
  new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port: Number(port) });
    socket.setTimeout(1000);
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => (socket.destroy(), resolve(false)));
  });
// Before anything else, so a second start neither seeds into the running one nor ends in a stack.
for (const [name, value] of [
  ["PORT", port],
  ["SAMPLE_APP_PORT", samplePort],
]) {
  if (await busy(value)) {
    console.error(
      `dev: port ${value} is already in use (another \`npm run dev\`?). Stop it, or choose other ports: PORT=8788 SAMPLE_APP_PORT=8791 npm run dev (${name} is the busy one).`,
    );
    process.exit(1);
  }
}

if (!existsSync(".dev.vars")) {
  const secret = () => randomBytes(32).toString("base64url");
  const vars = readFileSync(".dev.vars.example", "utf8")
    .replace(/^ADMIN_TOKEN=.*$/m, `ADMIN_TOKEN=${secret()}`)
    .replace(/^JWT_SECRET=.*$/m, `JWT_SECRET=${secret()}`)
    .replace(/^WEBHOOK_ENCRYPTION_KEY=.*$/m, `WEBHOOK_ENCRYPTION_KEY=${secret()}`);
  writeFileSync(".dev.vars", vars, { mode: 0o600 });
  console.log("dev: wrote .dev.vars with fresh secrets (it is git-ignored).");
}
const adminToken = /^ADMIN_TOKEN=(.*)$/m.exec(readFileSync(".dev.vars", "utf8"))?.[1];

// Extra settings for the Worker: `npm run dev -- --var NAME:VALUE` (as `wrangler dev --var`).
const extraVars = {};
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i];
  const given = arg === "--var" ? process.argv[++i] : arg.startsWith("--var=") ? arg.slice(6) : null;
  const match = given === null || given === undefined ? null : /^([A-Za-z_][A-Za-z0-9_]*):(.*)$/s.exec(given);
  if (!match) {
    console.error(`dev: only --var NAME:VALUE is taken after \`--\` (got ${JSON.stringify(arg)}).`);
    process.exit(2);
  }
  extraVars[match[1]] = match[2];
}

// The migrations, once: wrangler prints its whole table after each one applied; one line says the same.
const migrate = spawnSync("npx", ["wrangler", "d1", "migrations", "apply", "DB", "--local"], {
  encoding: "utf8",
  env: { ...env, ...MIGRATE_ENV },
});
if (migrate.status !== 0) {
  process.stderr.write(`${migrate.stdout}${migrate.stderr}`);
  console.error("dev: the D1 migrations did not apply (above: wrangler's output).");
  process.exit(migrate.status ?? 1);
}
say(`dev: ${migrationsSummary(migrate.stdout)}`);

// People's sign-in: a local OpenID provider (scripts/oidc-provider.mjs) on a free loopback port, with a
// development user who owns the demo project (invited below, claimed at their first sign-in).
const { startOidcProvider } = await import("./oidc-provider.mjs");
const DEV_USER = { login: "dev", email: "dev@example.test", name: "Dev User" };
const oidcClient = { client_id: "edge-gateway-dev", client_secret: randomBytes(24).toString("base64url") };
const oidc = await startOidcProvider({
  accounts: { [DEV_USER.login]: { email: DEV_USER.email, email_verified: true, name: DEV_USER.name } },
  clients: [
    {
      ...oidcClient,
      redirect_uris: ["localhost", "127.0.0.1"].map((host) => `http://${host}:${port}/dashboard/oidc/callback`),
    },
  ],
});
const vars = {
  OIDC_ISSUER: oidc.issuer,
  OIDC_CLIENT_ID: oidcClient.client_id,
  OIDC_CLIENT_SECRET: oidcClient.client_secret,
};

// Custom domains validate offline: the DNS harness (scripts/dns-harness, knot behind dnsdist) is
// started when nothing answers yet (never restarted: other checkouts may use it), and the gateway is
// pointed at it. Its zones hold good.example.test, a hostname that validates as it is.
let dnsNote;
try {
  const { ensureDnsHarness } = await import("../test/global/dns-harness.mjs");
  vars.DNS_RESOLVER_URL = await ensureDnsHarness();
  dnsNote = `DNS harness at ${vars.DNS_RESOLVER_URL} (good.example.test validates as it is)`;
} catch (error) {
  dnsNote = `no DNS harness (${error.message.split("\n")[0]}): domain checks will say DNS_UNAVAILABLE`;
}
Object.assign(vars, extraVars);

const sampleApp = spawn(process.execPath, ["examples/sample-app/server.mjs"], {
  stdio: ["ignore", "inherit", "inherit"],
  env: { ...env, PORT: samplePort },
});

// The gateway: wrangler's dev environment (what `wrangler dev` runs), its Worker reached straight at
// its own address, which moves when it reloads after a change.
const { unstable_DevEnv: DevEnv } = await import("wrangler");
const devEnv = new DevEnv();
let origin = null;
let originReady;
let whenReady = new Promise((resolve) => (originReady = resolve));
let reloads = 0;
devEnv.on("reloadComplete", (event) => {
  const { protocol, hostname, port: workerPort } = event.proxyData.userWorkerUrl;
  origin = `${protocol}//${hostname}:${workerPort}`;
  originReady(origin);
  if (reloads++ > 0) say("dev: the gateway reloaded after a change");
});
devEnv.on("error", (event) => console.error(`dev: ${event.reason ?? event.message ?? event}`));
const worker = await devEnv.startWorker({
  config: "wrangler.toml",
  bindings: Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, { type: "plain_text", value: v }])),
  dev: {
    // wrangler's own proxy listens on a port nobody is told of; people use the front's.
    server: { hostname: "127.0.0.1", port: 0 },
    inspector: false,
    watch: true,
    testScheduled: true,
    logLevel: "warn",
    structuredLogsHandler: (entry) => {
      const text = formatLog(entry);
      if (text !== null) (entry.level === "error" ? process.stderr : process.stdout).write(`${text}\n`);
    },
  },
});
// The requests of the set-up below (seeding the demo) are ours, not the person's: their lines are left out,
// by when they started (a line is printed when its answer has ended, which may be after the set-up).
let setUpUntil = Infinity;
const front = await startFront({
  port,
  color,
  print: (text, line) => line.started >= setUpUntil && say(text),
  target: () => (origin ? Promise.resolve(origin) : whenReady),
});

let stopping = false;
async function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  sampleApp.kill("SIGTERM");
  await Promise.allSettled([front.close(), worker.dispose(), oidc.stop()]);
  process.exit(code);
}
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => void stop(0));
// wrangler's dev environment may end the process on a signal before `stop` has run: the children go too.
process.on("exit", () => sampleApp.kill("SIGTERM"));
sampleApp.on("exit", (code) => {
  if (!stopping) console.error(`dev: the sample app stopped (exit ${code}); stopping.`);
  void stop(code ?? 1);
});

await whenReady;
let demo = null;
// Seed the demo once the gateway answers (skip with SEED_DEMO=0).
if (process.env.SEED_DEMO !== "0") {
  // Not spawnSync: the front serving the seed's requests runs in this process.
  const seeding = spawn(
    process.execPath,
    ["scripts/seed-demo.mjs", `http://127.0.0.1:${port}`, adminToken, `http://127.0.0.1:${samplePort}`, "--quiet"],
    { stdio: ["ignore", "ignore", "inherit"], env },
  );
  const [code] = await once(seeding, "exit");
  if (code === 0) {
    demo = JSON.parse(readFileSync(process.env.DEMO_STATE ?? ".wrangler/demo.json", "utf8"));
    await inviteDevUser();
  }
}
setUpUntil = Date.now();
banner();

/** The development user becomes owner of every project at their next sign-in (an open invite is kept once). */
async function inviteDevUser() {
  const headers = { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" };
  const projects = await fetch(`http://127.0.0.1:${port}/v2/projects?limit=100`, { headers }).then((r) => r.json());
  for (const project of projects.data ?? []) {
    await fetch(`http://127.0.0.1:${port}/v2/projects/${project.project_id}/invites`, {
      method: "POST",
      headers,
      body: JSON.stringify({ email: DEV_USER.email, role: "owner" }),
    });
  }
}

/** Everything a newcomer needs next, last on the screen: where to go, the token, a first run. */
function banner() {
  const rule = "─".repeat(78);
  const lines = [
    rule,
    `The gateway is ready at ${base} (requests below, one line each; Ctrl-C stops everything).`,
    "",
    `Dashboard  ${base}/dashboard`,
    `           sign in with the admin token (ADMIN_TOKEN in .dev.vars):`,
    `           ${adminToken}`,
    `           or "Sign in with single sign-on" as "${DEV_USER.login}" (local OpenID provider at ${oidc.issuer})`,
    `API docs   ${base}/v2/docs`,
    `Sample app http://127.0.0.1:${samplePort} (functions /run /slow /fail /stream /image, OpenAI /v1, receiver /webhook)`,
    `Domains    ${dnsNote}`,
  ];
  if (demo) {
    lines.push(
      "",
      `Demo project ${demo.project_id}: apps hello-world (cortex) and llm (custom), a service account token.`,
      "In another terminal (the README's Quickstart goes on from here):",
      "",
      `  export BASE=${base} P=${demo.project_id} TOKEN=${demo.token}`,
      `  curl -s -X POST "$BASE/v4/$P/hello-world/run" -H "Authorization: Bearer $TOKEN" \\`,
      `    -H 'Content-Type: application/json' -d '{"inputs":{"name":"edge"}}'`,
      "",
      `Runs of the demo: ${base}/dashboard/projects/${demo.project_id}/runs`,
    );
  } else if (process.env.SEED_DEMO !== "0") {
    lines.push("", "The demo project could not be seeded (above: why).");
  }
  lines.push(rule);
  say(lines.join("\n"));
}
