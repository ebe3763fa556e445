// V8's sampling profiler over the gateway's isolate (its Durable Objects run there too), through
// workerd's inspector: self time by function, and SQLite's `exec` by the functions that called it.
// Used by profile-run.mjs and profile-async.mjs; the bundle keeps function names.

/** Connects to the inspector at `port` (the gateway's target), profiles while `work()` runs, and returns the profile. */
export async function profileWhile(port, work) {
  const list = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
  const target = list.find((t) => /gateway/.test(t.title ?? t.id ?? "") || /gateway/.test(t.webSocketDebuggerUrl));
  const ws = new WebSocket((target ?? list[0]).webSocketDebuggerUrl);
  await new Promise((resolve) => ws.addEventListener("open", resolve));
  let id = 0;
  const pending = new Map();
  ws.addEventListener("message", (e) => {
    const m = JSON.parse(e.data);
    if (m.id && pending.has(m.id)) pending.get(m.id)(m.result);
  });
  const send = (method, params = {}) =>
    new Promise((resolve) => (pending.set(++id, resolve), ws.send(JSON.stringify({ id, method, params }))));
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 50 });
  await send("Profiler.start");
  const result = await work();
  const { profile } = await send("Profiler.stop");
  ws.close();
  return { profile, result };
}

const where = (f) => `${f.functionName || "(anonymous)"} ${f.url.split("/").pop()}:${f.lineNumber + 1}`;

/**
 * Prints the top `top` functions by self time, in ms per `units` (runs) over the profile's span; with
 * `execCallers`, SQLite's `exec` too, by its callers (up to 4 frames of the bundle).
 */
export function printProfile(profile, { units, label, top = 40, execCallers = false }) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const counts = new Map();
  for (const s of profile.samples) counts.set(s, (counts.get(s) ?? 0) + 1);
  const total = profile.samples.length;
  const spanMs = (profile.endTime - profile.startTime) / 1000;
  const perUnit = (n) => ((n / total) * spanMs) / units;
  const self = new Map();
  for (const [nodeId, n] of counts) {
    const key = where(byId.get(nodeId).callFrame);
    self.set(key, (self.get(key) ?? 0) + n);
  }
  console.log(`${label}: ${total} samples over ${(spanMs / 1000).toFixed(1)} s; self time per run (ms), top ${top}:`);
  for (const [key, n] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${perUnit(n).toFixed(4)}  ${((n / total) * 100).toFixed(1)}%  ${key}`);
  if (!execCallers) return;
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byCaller = new Map();
  for (const [nodeId, n] of counts) {
    if (byId.get(nodeId).callFrame.functionName !== "exec") continue;
    const chain = [];
    for (let p = parent.get(nodeId); p !== undefined && chain.length < 4; p = parent.get(p)) {
      const f = byId.get(p).callFrame;
      if (f.url) chain.push(`${f.functionName || "(anonymous)"}:${f.lineNumber + 1}`);
    }
    const key = chain.join(" < ");
    byCaller.set(key, (byCaller.get(key) ?? 0) + n);
  }
  console.log("\nSQLite `exec` per run (ms), by its callers in the bundle:");
  for (const [key, n] of [...byCaller].sort((a, b) => b[1] - a[1]).slice(0, 25))
    console.log(`${perUnit(n).toFixed(4)}  ${key}`);
}
