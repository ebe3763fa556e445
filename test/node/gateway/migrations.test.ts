import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const wrangler = (args: string[]) =>
  run("npx", ["wrangler", ...args], {
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" },
    maxBuffer: 16 * 1024 * 1024,
  });

describe("migrations", () => {
  let dir: string;
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("apply cleanly from an empty database with `wrangler d1 migrations apply`", async () => {
    dir = await mkdtemp(join(tmpdir(), "edge-gateway-migrations-"));
    await wrangler(["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir]);
    const { stdout } = await wrangler([
      "d1",
      "execute",
      "DB",
      "--local",
      "--persist-to",
      dir,
      "--json",
      "--command",
      "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    ]);
    const tables = (JSON.parse(stdout) as { results: { name: string }[] }[])[0]!.results.map((r) => r.name);
    expect(tables).toEqual(expect.arrayContaining(["projects", "service_accounts", "apps", "builds", "d1_migrations"]));
    // Applying again finds nothing to do.
    const again = await wrangler(["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir]);
    expect(again.stdout + again.stderr).toMatch(/No migrations to apply/i);
  });
});
