// `npm run dev`: local secrets on first run, local D1 migrations, then `wrangler dev` with local
// D1, Queues and Cron (`/__scheduled` triggers the cron by hand).
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const env = { ...process.env, WRANGLER_SEND_METRICS: "false" };
const port = process.env.PORT ?? "8787";

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

console.log(`dev: serving on http://localhost:${port} (try: curl -H "Authorization: Bearer $ADMIN_TOKEN" http://localhost:${port}/v2/projects)`);
const dev = spawn("npx", ["wrangler", "dev", "--port", port, "--test-scheduled", ...process.argv.slice(2)], { stdio: "inherit", env });
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => dev.kill(signal));
dev.on("exit", (code) => process.exit(code ?? 0));
