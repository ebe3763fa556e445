import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

/** The DoH server `wrangler.toml`'s DNS_RESOLVER_URL names: the shared harness (../shared/harness/dns). */
export const DOH_URL = "http://127.0.0.1:8053/dns-query";
const START = join(process.cwd(), "..", "shared", "harness", "dns", "start.sh");

// good.example.test CNAME, id 0, RD: a name the harness always serves.
const PROBE = Uint8Array.from([
  0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 4, ...Buffer.from("good"), 7, ...Buffer.from("example"), 4, ...Buffer.from("test"), 0, 0, 5, 0, 1,
]);

async function answers(): Promise<boolean> {
  try {
    const response = await fetch(DOH_URL, {
      method: "POST",
      headers: { "content-type": "application/dns-message", accept: "application/dns-message" },
      body: PROBE,
      signal: AbortSignal.timeout(2000),
    });
    const body = new Uint8Array(await response.arrayBuffer());
    return response.status === 200 && body.length > 12 && (body[3]! & 15) === 0 && ((body[6]! << 8) | body[7]!) >= 1;
  } catch {
    return false;
  }
}

/**
 * Makes sure the DNS harness answers, starting it (idempotent, installs with apt as root on first use)
 * only when it does not: start.sh restarts a running harness, which would disturb tests already using it.
 */
export async function ensureDnsHarness(): Promise<void> {
  if (await answers()) return;
  if (!existsSync(START)) throw new Error(`No DoH server at ${DOH_URL} and no harness at ${START} to start one.`);
  await new Promise<void>((resolve, reject) =>
    execFile("bash", [START], { timeout: 240_000 }, (error, _stdout, stderr) =>
      error ? reject(new Error(`${START} failed: ${error.message}\n${stderr.slice(-2000)}`)) : resolve(),
    ),
  );
  if (!(await answers())) throw new Error(`The DNS harness started but ${DOH_URL} does not answer.`);
}
