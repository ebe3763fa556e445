import { type ChildProcess, execFile, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const WRANGLER = join(process.cwd(), "node_modules", "wrangler", "bin", "wrangler.js");

export interface DevServer {
  url: string;
  stop(): Promise<void>;
  log(): string;
}

/**
 * `wrangler dev` on a fresh local D1 (migrated by `wrangler d1 migrations apply`, the one tool that
 * applies migrations), with secrets from a generated env file. Node 22 runs it (`process.execPath`
 * under `npm test`).
 */
export async function startWranglerDev(options: { dir: string; port: number; inspectorPort: number; secrets: Record<string, string> }): Promise<DevServer> {
  const persist = join(options.dir, "state");
  const envFile = join(options.dir, "dev.vars");
  writeFileSync(envFile, Object.entries(options.secrets).map(([k, v]) => `${k}=${v}`).join("\n") + "\n");
  const env = { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "1", NO_COLOR: "1" };
  await run(process.execPath, [WRANGLER, "d1", "migrations", "apply", "DB", "--local", "--persist-to", persist], { env, timeout: 60_000 });

  let output = "";
  const child: ChildProcess = spawn(
    process.execPath,
    [
      WRANGLER, "dev",
      "--ip", "127.0.0.1",
      "--port", String(options.port),
      "--inspector-port", String(options.inspectorPort),
      "--persist-to", persist,
      "--env-file", envFile,
      "--show-interactive-dev-session=false",
    ],
    { env, stdio: ["ignore", "pipe", "pipe"], detached: false },
  );
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  const url = `http://127.0.0.1:${options.port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited (${child.exitCode}):\n${output}`);
    try {
      const response = await fetch(`${url}/dashboard/assets/dashboard.css`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGTERM");
      throw new Error(`wrangler dev did not answer on ${url} within 60 s:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return {
    url,
    log: () => output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
      if (child.exitCode === null) child.kill("SIGKILL");
    },
  };
}

/** A port nothing listens on now, so parallel runs of the suite (CI beside a developer) do not collide. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
