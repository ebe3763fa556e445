// Runs wrk (Debian package) on its own core and reads its summary.
import { execFileSync, spawn } from "node:child_process";

export function ensureWrk() {
  try {
    execFileSync("wrk", ["--version"], { stdio: "ignore" });
  } catch (error) {
    // wrk prints its version and exits 1; only a missing binary is a problem.
    if (error.code !== "ENOENT") return;
    if (process.getuid?.() !== 0) throw new Error("wrk is not installed: apt-get install -y wrk", { cause: error });
    console.error("bench: installing wrk (apt)…");
    execFileSync("sh", ["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk"], {
      stdio: "inherit",
    });
  }
}

const UNITS = { us: 0.001, ms: 1, s: 1000 };
const toMs = (value, unit) => Number(value) * UNITS[unit];

/** Loads `url` with `connections` for `seconds`; wrk pinned to `cpu` when taskset exists. */
export function wrk({ url, headers = {}, connections, seconds, cpu }) {
  const args = ["-t1", `-c${connections}`, `-d${seconds}s`, "--latency", "--timeout", "10s"];
  for (const [name, value] of Object.entries(headers)) args.push("-H", `${name}: ${value}`);
  args.push(url);
  const [command, argv] = cpu === undefined ? ["wrk", args] : ["taskset", ["-c", String(cpu), "wrk", ...args]];
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("error", reject);
    child.on("exit", () => {
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
      const p50 = /^\s+50%\s+([\d.]+)(us|ms|s)\s*$/m.exec(out);
      const p99 = /^\s+99%\s+([\d.]+)(us|ms|s)\s*$/m.exec(out);
      const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
      const errors = /Socket errors: (.*)$/m.exec(out);
      if (!rps || !p50 || !p99) return reject(new Error(`cannot read wrk output:\n${out}`));
      resolve({
        rps: Number(rps[1]),
        p50: toMs(p50[1], p50[2]),
        p99: toMs(p99[1], p99[2]),
        non2xx: non2xx ? Number(non2xx[1]) : 0,
        errors: errors?.[1] ?? null,
      });
    });
  });
}
