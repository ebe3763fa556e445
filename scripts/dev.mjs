// `npm run dev`: local secrets on first run, local D1 migrations, the sample app (an upstream and a
// webhook receiver on 127.0.0.1:8790), then `wrangler dev` with local D1, Queues and Cron
// (`/__scheduled` fires the cron), and a seeded demo project whose app runs on the sample app.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";

// CLOUDFLARE_CF_FETCH_ENABLED=false: wrangler would fetch request.cf's sample data from
// workers.cloudflare.com on every start (a stack trace each time without internet); the gateway reads
// nothing from request.cf, so the built-in placeholder serves as well.
const env = { CLOUDFLARE_CF_FETCH_ENABLED: "false", ...process.env, WRANGLER_SEND_METRICS: "false" };
const port = process.env.PORT ?? "8787";
const samplePort = process.env.SAMPLE_APP_PORT ?? "8790";
const base = `http://127.0.0.1:${port}`;

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
console.log(`dev: admin token (ADMIN_TOKEN in .dev.vars): ${adminToken}`);

const migrate = spawnSync("npx", ["wrangler", "d1", "migrations", "apply", "DB", "--local"], {
  stdio: "inherit",
  env: { ...env, CI: "true" },
});
if (migrate.status !== 0) process.exit(migrate.status ?? 1);

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
const oidcVars = [
  "--var",
  `OIDC_ISSUER:${oidc.issuer}`,
  "--var",
  `OIDC_CLIENT_ID:${oidcClient.client_id}`,
  "--var",
  `OIDC_CLIENT_SECRET:${oidcClient.client_secret}`,
];
console.log(
  `dev: people sign in at ${oidc.issuer} (local OpenID provider): "Sign in with single sign-on", login "${DEV_USER.login}" (${DEV_USER.email}).`,
);

// Custom domains validate offline: the DNS harness (scripts/dns-harness, knot behind dnsdist) is
// started when nothing answers yet (never restarted: other checkouts may use it), and the gateway is
// pointed at it. Its zones hold good.example.test, a hostname that validates as it is.
const dnsVars = [];
try {
  const { ensureDnsHarness } = await import("../test/global/dns-harness.mjs");
  const doh = await ensureDnsHarness();
  dnsVars.push("--var", `DNS_RESOLVER_URL:${doh}`);
  console.log(`dev: DNS harness at ${doh}; add good.example.test (region us-east-1) to see a domain validate.`);
} catch (error) {
  console.warn(`dev: no DNS harness (${error.message.split("\n")[0]}); domain checks will say DNS_UNAVAILABLE.`);
}

const children = [
  spawn(process.execPath, ["examples/sample-app/server.mjs"], { stdio: "inherit", env: { ...env, PORT: samplePort } }),
  spawn(
    "npx",
    ["wrangler", "dev", "--port", port, "--test-scheduled", ...dnsVars, ...oidcVars, ...process.argv.slice(2)],
    { stdio: "inherit", env },
  ),
];
const stop = (signal) => children.forEach((child) => child.kill(signal));
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => stop(signal));
for (const child of children) {
  child.on("exit", (code) => {
    stop("SIGTERM");
    process.exit(code ?? 0);
  });
}

// Seed the demo once the gateway answers (skip with SEED_DEMO=0).
if (process.env.SEED_DEMO !== "0") {
  for (let i = 0; i < 120; i++) {
    const ready = await fetch(`${base}/v2/openapi.json`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) {
      spawnSync(process.execPath, ["scripts/seed-demo.mjs", base, adminToken, `http://127.0.0.1:${samplePort}`], {
        stdio: "inherit",
        env,
      });
      await inviteDevUser();
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** The development user becomes owner of every project at their next sign-in (an open invite is kept once). */
async function inviteDevUser() {
  const headers = { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" };
  const projects = await fetch(`${base}/v2/projects?limit=100`, { headers }).then((r) => r.json());
  for (const project of projects.data ?? []) {
    await fetch(`${base}/v2/projects/${project.project_id}/invites`, {
      method: "POST",
      headers,
      body: JSON.stringify({ email: DEV_USER.email, role: "owner" }),
    });
  }
}
