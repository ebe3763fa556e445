// The CPU a local server's process has used, read from /proc: what the bench's per-request figures divide.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** CPU time (ms) the process listening at `url` has used so far, or null where /proc and ss are not there. */
export function cpuReader(url) {
  try {
    const pid = /pid=(\d+)/.exec(execFileSync("ss", ["-ltnpH", `sport = :${new URL(url).port}`]).toString())?.[1];
    const tick = Number(execFileSync("getconf", ["CLK_TCK"]).toString());
    if (!pid || !tick) return null;
    return () => {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / tick;
    };
  } catch {
    return null;
  }
}
