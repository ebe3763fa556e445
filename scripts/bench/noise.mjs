// The noise said aloud: how much CPU other processes took while a part of the bench ran. The machine's
// busy time (/proc/stat, every CPU) minus the bench's own process tree's (this process and every
// descendant: workerd, wrk, Node peers; /proc/<pid>/stat, children that have exited included through
// their parent's cutime/cstime). Where /proc is not there, nothing is measured and nothing is claimed.
import { readdirSync, readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";

let tick = null;
try {
  tick = Number(execFileSync("getconf", ["CLK_TCK"]).toString());
} catch {
  tick = null;
}

/** Busy CPU time of the whole machine, in ms (all CPUs, everything but idle and iowait). */
function machineBusyMs() {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0];
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest is counted in user)
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return ((user + nice + system + irq + softirq + steal) * 1000) / tick;
}

function stat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = text.slice(text.lastIndexOf(") ") + 2).split(" ");
    // After the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14)
    return {
      ppid: Number(fields[1]),
      ticks: Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]),
    };
  } catch {
    return null;
  }
}

/** CPU (ms) of `root` and every live descendant, exited children included where their parent reaped them. */
function treeMs(root) {
  const parent = new Map();
  const own = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const s = stat(name);
    if (!s) continue;
    parent.set(Number(name), s.ppid);
    own.set(Number(name), s.ticks);
  }
  let ticks = 0;
  for (const [pid, t] of own) {
    for (let p = pid; p; p = parent.get(p)) {
      if (p === root) {
        ticks += t;
        break;
      }
    }
  }
  return (ticks * 1000) / tick;
}

const available = (() => {
  try {
    return tick > 0 && Number.isFinite(machineBusyMs()) && treeMs(process.pid) >= 0;
  } catch {
    return false;
  }
})();

/**
 * Starts measuring; the function returned stops and answers `{ wallMs, ownMs, othersMs, othersShare }`:
 * the bench's own CPU, the CPU other processes took, and that as a share of one core over the wall
 * time (0.25 = a quarter of a core). A descendant that exits between the two readings and whose
 * parent is outside the tree is not counted as the bench's: the figure is then an over-estimate of
 * the others, never an under-estimate.
 */
export function noiseMeter() {
  if (!available) return () => null;
  const started = performance.now();
  const busy = machineBusyMs();
  const own = treeMs(process.pid);
  return () => {
    const wallMs = performance.now() - started;
    const ownMs = treeMs(process.pid) - own;
    const othersMs = Math.max(0, machineBusyMs() - busy - ownMs);
    return { wallMs, ownMs, othersMs, othersShare: wallMs > 0 ? othersMs / wallMs : 0 };
  };
}

/** One line for a section: "others took 1.2 CPU-s in 34 s (0.04 of a core); the bench 50.1 CPU-s". */
export function noiseLine(n) {
  if (!n) return "noise: not measured (no /proc here)";
  return `noise: other processes took **${(n.othersMs / 1000).toFixed(1)} CPU-s** while this ran (${(n.wallMs / 1000).toFixed(0)} s wall, **${n.othersShare.toFixed(2)} of a core** on average; the bench itself ${(n.ownMs / 1000).toFixed(1)} CPU-s)`;
}
