import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, type AddressInfo } from "node:net";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_SECRETS } from "../secrets";
import { type DevServer, startWranglerDev } from "./wrangler-dev";

/**
 * What a new user does in the first hour, against `wrangler dev` as `npm run dev` runs it: the README's
 * Quickstart script, and a receiver in plain Node that installs the verification package from its
 * packed tarball and verifies a real signed delivery.
 */
const run = promisify(execFile);
let dir: string;
let server: DevServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "eg-first-hour-"));
  server = await startWranglerDev({ dir, secrets: TEST_SECRETS });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** `bash examples/quickstart.sh` with its exit code and output, never throwing. */
async function quickstart(adminToken: string) {
  try {
    const { stdout, stderr } = await run("bash", ["examples/quickstart.sh"], {
      env: { ...process.env, API: `${server.url}/v2`, ADMIN_TOKEN: adminToken },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe("the Quickstart", () => {
  it("is in the README exactly as examples/quickstart.sh runs it", () => {
    const readme = readFileSync("README.md", "utf8");
    const script = readFileSync("examples/quickstart.sh", "utf8");
    expect(readme).toContain("```sh\n" + script + "```");
  });

  it("goes from nothing to a cancelled build, and cancelling again answers the same", async () => {
    const result = await quickstart(TEST_SECRETS.ADMIN_TOKEN);
    expect(result.code, result.stderr).toBe(0);
    const answers = result.stdout.split("\n").filter((line) => line.startsWith("{"));
    expect(answers).toHaveLength(2);
    expect(answers.map((line) => (JSON.parse(line) as { status: string }).status)).toEqual(["cancelled", "cancelled"]);
    expect(answers[0]).toBe(answers[1]);
  });

  it("stops at the failed step and says why, instead of going on with empty ids", async () => {
    const result = await quickstart("not-the-admin-token-of-this-installation");
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/^quickstart: POST \/projects answered 401: \{.*"code":"invalid_token"/m);
    expect(result.stdout).toContain("1. The operator creates a project.");
    expect(result.stdout).not.toContain("2. ");
    expect(`${result.stdout}${result.stderr}`).not.toMatch(/undefined|SyntaxError/);
  });
});

describe("npm run dev", () => {
  it("says in one line that a port is busy, before it migrates, starts or seeds anything", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
        execFile(
          process.execPath,
          ["scripts/dev.mjs"],
          { env: { ...process.env, PORT: String(port) }, timeout: 30_000 },
          (error, stdout, stderr) =>
            resolve({ code: error ? (typeof error.code === "number" ? error.code : -1) : 0, stdout, stderr }),
        ),
      );
      expect(result.code).toBe(1);
      expect(result.stdout).toBe("");
      expect(result.stderr.trim().split("\n")).toEqual([
        `dev: port ${port} is already in use (another \`npm run dev\`?). Stop it, or choose other ports: PORT=8788 SAMPLE_APP_PORT=8791 npm run dev (PORT is the busy one).`,
      ]);
    } finally {
      taken.close();
    }
  });

  it("seeds the demo project once: a second start finds it and seeds nothing", async () => {
    const state = join(dir, "demo.json");
    const seed = () =>
      run(process.execPath, ["scripts/seed-demo.mjs", server.url, TEST_SECRETS.ADMIN_TOKEN, "http://127.0.0.1:9"], {
        env: { ...process.env, DEMO_STATE: state },
        timeout: 30_000,
      });
    const first = await seed();
    expect(first.stdout).toMatch(/^Seeded project proj_/);
    // What it prints leads on to where the runs show: the records, the figures and the dashboard.
    const project = /^Seeded project (proj_\w+)/.exec(first.stdout)![1];
    for (const path of [
      `/v2/projects/${project}/runs'`,
      `/v2/projects/${project}/usage'`,
      `/dashboard/projects/${project}/usage`,
    ])
      expect(first.stdout).toContain(`${server.url}${path}`);
    const second = await seed();
    expect(second.stdout).toMatch(/^The demo project proj_\w+ is already seeded/);
    const projects = (await (
      await fetch(`${server.url}/v2/projects?limit=100`, {
        headers: { Authorization: `Bearer ${TEST_SECRETS.ADMIN_TOKEN}` },
      })
    ).json()) as {
      data: { name: string }[];
    };
    expect(projects.data.filter((p) => p.name === "demo")).toHaveLength(1);
  });
});

/** A receiver in plain Node: only the installed package, no TypeScript, no test runner in between. */
const RECEIVER = `
import { createServer } from "node:http";
import { verifyWebhook, WebhookVerificationError } from "@edge-gateway/verify";

const secret = process.env.WEBHOOK_SECRET;
const codeOf = (promise) => promise.then(() => "verified", (error) => (error instanceof WebhookVerificationError ? error.code : String(error)));
const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", async () => {
    if (req.url !== "/webhook") return res.writeHead(200, { "content-type": "application/json" }).end('{"greeting":"hello"}');
    const body = Buffer.concat(chunks);
    const { "x-service-webhook-timestamp": _, ...withoutTimestamp } = req.headers;
    const result = {
      id: req.headers["x-request-id"],
      verified: await codeOf(verifyWebhook(secret, req.headers, body)),
      wrongSecret: await codeOf(verifyWebhook(secret + "x", req.headers, body)),
      reserialised: await codeOf(verifyWebhook(secret, req.headers, JSON.stringify(JSON.parse(body.toString()), null, 2))),
      noTimestamp: await codeOf(verifyWebhook(secret, withoutTimestamp, body)),
    };
    res.writeHead(204).end();
    console.log(JSON.stringify(result));
  });
});
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: server.address().port })));
`;

describe("@edge-gateway/verify from its packed tarball", () => {
  let receiver: ChildProcess | undefined;
  afterAll(() => {
    receiver?.kill();
  });

  it("installs with no dependencies, and plain Node verifies a real signed delivery with it", async () => {
    const packs = join(dir, "packs");
    mkdirSync(packs);
    const app = join(dir, "receiver");
    mkdirSync(app);
    const { stdout } = await run("npm", ["pack", "./packages/verify", "--pack-destination", packs, "--json"], {
      timeout: 60_000,
    });
    const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
    expect(packed!.files.map((f) => f.path).sort()).toEqual(["README.md", "index.d.ts", "index.js", "package.json"]);

    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "receiver", private: true, type: "module" }));
    writeFileSync(join(app, "receiver.mjs"), RECEIVER);
    await run("npm", ["install", "--offline", "--no-audit", "--no-fund", join(packs, packed!.filename)], {
      cwd: app,
      timeout: 60_000,
    });
    expect(readdirSync(join(app, "node_modules")).filter((name) => !name.startsWith("."))).toEqual(["@edge-gateway"]);

    const secret = "first-hour-webhook-secret";
    const child = spawn(process.execPath, ["receiver.mjs"], {
      cwd: app,
      env: { ...process.env, WEBHOOK_SECRET: secret },
      stdio: ["ignore", "pipe", "pipe"],
    });
    receiver = child;
    const lines: Record<string, unknown>[] = [];
    let errors = "";
    child.stderr!.on("data", (chunk: Buffer) => (errors += chunk.toString()));
    child.stdout!.on("data", (chunk: Buffer) => {
      for (const line of chunk.toString().split("\n").filter(Boolean))
        lines.push(JSON.parse(line) as Record<string, unknown>);
    });
    await expect.poll(() => lines.length, { timeout: 10_000 }).toBeGreaterThan(0);
    const peer = `http://127.0.0.1:${String(lines[0]!.port)}`;

    // An app whose deployment is the receiver's /run, run with webhookEndpoint and a secret.
    const admin = TEST_SECRETS.ADMIN_TOKEN;
    const api = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${server.url}/v2${path}`, {
        method,
        headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
        body: JSON.stringify(body ?? {}),
      });
      expect(response.status, `${method} ${path}`).toBeLessThan(300);
      return (await response.json()) as Record<string, string>;
    };
    const project = await api("POST", "/projects", { name: "verify-package" });
    const p = `/projects/${project.project_id}`;
    const created = await api("POST", `${p}/apps`, { name: "signed", region: "us-east-1", runtime: "custom" });
    const build = await api("POST", `${p}/apps/${created.app_id}/builds`);
    await api("PATCH", `${p}/apps/${created.app_id}/builds/${build.build_id}`, { status: "building" });
    await api("PATCH", `${p}/apps/${created.app_id}/builds/${build.build_id}`, {
      status: "succeeded",
      origin_url: `${peer}/run`,
    });
    const ran = await fetch(
      `${server.url}/v4/${project.project_id}/signed/run?webhookEndpoint=${encodeURIComponent(`${peer}/webhook`)}`,
      {
        method: "POST",
        headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json", "X-Webhook-Secret": secret },
        body: JSON.stringify({ inputs: { name: "receiver" } }),
      },
    );
    expect(ran.status, await ran.clone().text()).toBe(200);

    await expect.poll(() => lines.length, { timeout: 30_000 }).toBeGreaterThan(1);
    expect(errors).toBe("");
    expect(lines[1]).toEqual({
      id: expect.stringMatching(/^whd_/),
      verified: "verified",
      wrongSecret: "signature_mismatch",
      reserialised: "signature_mismatch",
      noTimestamp: "missing_header",
    });
  });
});
