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

/** Port collisions are retried this many times in all: a free port can be taken before wrangler binds it. */
const PORT_TRIES = 3;

/** wrangler dev exited because another process took one of its ports first. */
class PortTaken extends Error {}

/**
 * `wrangler dev` on a fresh local D1 (migrated by `wrangler d1 migrations apply`, the one tool that
 * applies migrations), with secrets from a generated env file, on free ports. Node 22 runs it
 * (`process.execPath` under `npm test`).
 */
export async function startWranglerDev(options: { dir: string; secrets: Record<string, string> }): Promise<DevServer> {
  const persist = join(options.dir, "state");
  const envFile = join(options.dir, "dev.vars");
  writeFileSync(
    envFile,
    Object.entries(options.secrets)
      .map(([k, v]) => `${k}=${v}`)
      .join("\n") + "\n",
  );
  const env = {
    CLOUDFLARE_CF_FETCH_ENABLED: "false",
    ...process.env,
    WRANGLER_SEND_METRICS: "false",
    CI: "1",
    NO_COLOR: "1",
  };
  await run(process.execPath, [WRANGLER, "d1", "migrations", "apply", "DB", "--local", "--persist-to", persist], {
    env,
    // A minute and more on a busy machine (72 s seen with ~12 other cores busy).
    timeout: 180_000,
  });
  // The suite's other files start servers in parallel, so a port free a moment ago may be taken.
  for (let tries = 1; ; tries++) {
    try {
      return await spawnDev({ env, persist, envFile, port: await freePort(), inspectorPort: await freePort() });
    } catch (error) {
      if (!(error instanceof PortTaken) || tries >= PORT_TRIES) throw error;
    }
  }
}

async function spawnDev(options: {
  env: NodeJS.ProcessEnv;
  persist: string;
  envFile: string;
  port: number;
  inspectorPort: number;
}): Promise<DevServer> {
  const { env, persist, envFile } = options;
  let output = "";
  const child: ChildProcess = spawn(
    process.execPath,
    [
      WRANGLER,
      "dev",
      "--ip",
      "127.0.0.1",
      "--port",
      String(options.port),
      "--inspector-port",
      String(options.inspectorPort),
      "--persist-to",
      persist,
      "--env-file",
      envFile,
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
    if (child.exitCode !== null) {
      const message = `wrangler dev exited (${child.exitCode}):\n${output}`;
      throw /Address already in use|EADDRINUSE/.test(output) ? new PortTaken(message) : new Error(message);
    }
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
