// Vitest globalSetup (runs in Node): makes sure a real DNS server answers over RFC 8484 DoH, starting
// the harness of scripts/dns-harness (knot behind dnsdist, see its README) when it does not.
// Idempotent: a harness that already answers is reused, so repeated `npm test` runs cost nothing.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const HARNESS = fileURLToPath(new URL("../../scripts/dns-harness/start.sh", import.meta.url));
const DEFAULT_URL = "http://127.0.0.1:8053/dns-query";

// good.example.test CNAME, id 0, RD: a name the harness always serves.
const PROBE = Uint8Array.from([
  0,
  0,
  1,
  0,
  0,
  1,
  0,
  0,
  0,
  0,
  0,
  0,
  4,
  ...Buffer.from("good"),
  7,
  ...Buffer.from("example"),
  4,
  ...Buffer.from("test"),
  0,
  0,
  5,
  0,
  1,
]);

async function answers(url) {
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/dns-message", accept: "application/dns-message" },
      body: PROBE,
      signal: AbortSignal.timeout(2000),
    });
    const body = new Uint8Array(await response.arrayBuffer());
    return response.status === 200 && body.length > 12 && (body[3] & 15) === 0 && ((body[6] << 8) | body[7]) >= 1;
  } catch {
    return false;
  }
}

/**
 * Makes sure a DoH server answers at `url`, starting the harness only when none does: start.sh
 * restarts a running harness, which would disturb tests already using it. Also used by the browser tests.
 */
export async function ensureDnsHarness(url = process.env.TEST_DOH_URL || DEFAULT_URL) {
  if (await answers(url)) return url;
  if (!existsSync(HARNESS)) throw new Error(`No DoH server at ${url} and no harness at ${HARNESS} to start one.`);
  const printed = await new Promise((resolve, reject) =>
    execFile("bash", [HARNESS], { timeout: 240_000 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${HARNESS} failed: ${error.message}\n${stderr.slice(-2000)}`)) : resolve(stdout.trim()),
    ),
  );
  if (printed !== url)
    throw new Error(`The harness serves ${printed}, but the tests expect ${url} (set TEST_DOH_URL).`);
  if (!(await answers(url))) throw new Error(`The harness started but ${url} does not answer.`);
  return url;
}

export default async function setup(project) {
  project.provide("dohUrl", await ensureDnsHarness());
}
