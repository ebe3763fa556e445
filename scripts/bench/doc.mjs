// Turns one run of `npm run bench -- --out=<base>` into docs/benchmarks.md: the template
// (scripts/bench/doc-template.md) with the run's facts, its noise per section, every target with its
// verdict, what each miss costs and buys (scripts/bench/misses.mjs, filled with the run's own figures),
// and the run's printed sections in place.
//   node scripts/bench/doc.mjs <base> [--to=docs/benchmarks.md]
import { readFileSync, writeFileSync } from "node:fs";
import { MISSES } from "./misses.mjs";

const [base, ...rest] = process.argv.slice(2);
if (!base) {
  console.error("usage: node scripts/bench/doc.mjs <base of --out> [--to=docs/benchmarks.md]");
  process.exit(2);
}
const to = rest.find((a) => a.startsWith("--to="))?.slice(5) ?? "docs/benchmarks.md";
const run = JSON.parse(readFileSync(`${base}.json`, "utf8"));
const printed = readFileSync(`${base}.md`, "utf8");
const template = readFileSync(new URL("./doc-template.md", import.meta.url), "utf8");

const problems = [];
const fixed = (n, d = 2) => (n === null || n === undefined ? "–" : Number(n).toFixed(d));
const date = run.startedAt.slice(0, 10);
const m = run.machine;

const runText = [
  `Made on ${date}, ${run.startedAt.slice(11, 16)}–${run.endedAt.slice(11, 16)} UTC, with \`${run.command}\`` +
    ` (${run.settings.seconds} s per load, ${run.settings.reps} repetitions), on a ${m.cpus}-vCPU virtual machine` +
    ` (${m.model}, ${m.memoryGiB} GiB, Linux ${m.kernel}), Node ${m.node}, workerd ${m.workerd ?? "?"};` +
    ` servers pinned to CPU 0 and \`wrk\` to CPU 1: ${m.pinned ? "yes" : "no"}. Load average` +
    ` ${run.loadAverage.before.map((l) => fixed(l)).join(" / ")} before and` +
    ` ${run.loadAverage.after.map((l) => fixed(l)).join(" / ")} after (1, 5 and 15 minutes).`,
];
if (run.failures.length) {
  runText.push(`\nSections that failed in this run: ${run.failures.map((f) => `${f.name} (${f.error})`).join("; ")}.`);
  problems.push("some sections failed");
}
if (run.settings.reps < 3)
  problems.push(`only ${run.settings.reps} repetition(s): every figure here must have several`);

const noiseRows = Object.entries(run.noise)
  .filter(([, n]) => n)
  .map(
    ([name, n]) =>
      `| ${name} | ${fixed(n.wallMs / 1000, 0)} s | ${fixed(n.othersMs / 1000, 1)} CPU-s | **${fixed(n.othersShare)}** |`,
  );
const noisiest = Math.max(0, ...Object.values(run.noise).map((n) => n?.othersShare ?? 0));
if (noisiest > 0.1) problems.push(`other processes took up to ${fixed(noisiest)} of a core during a section`);
const noise = [
  "| section | wall time | CPU other processes took | share of one core |",
  "|---|---:|---:|---:|",
  ...noiseRows,
].join("\n");

const targeted = run.rows.filter((r) => r.target);
const verdictText = (v) => (v === "missed" ? "**missed**" : v === "undecided" ? "_undecided_" : (v ?? "not measured"));
const against = (r) => (r.vs ? ` (against ${r.vs})` : "");
const counts = { met: 0, missed: 0, undecided: 0, "not measured": 0 };
for (const r of targeted) counts[r.verdict ?? "not measured"]++;
const targets = [
  "| section | figure | median | min … max | target | verdict |",
  "|---|---|---:|---:|---|---|",
  ...targeted.map(
    (r) =>
      `| ${r.section} | ${r.label}${against(r)} | **${r.text.median}** | ${r.text.spread} | ${r.text.target} | ${verdictText(r.verdict)} |`,
  ),
  "",
  `${counts.met} met, ${counts.missed} missed, ${counts.undecided} undecided${counts["not measured"] ? `, ${counts["not measured"]} not measured` : ""}.`,
].join("\n");

// The run's own figures for the misses' texts.
const pieces = Object.fromEntries(run.extras.filter((e) => e.kind === "piece").map((e) => [e.data.id, e.data]));
const bodies = Object.fromEntries(run.extras.filter((e) => e.kind === "piece-bodies").map((e) => [e.data.id, e.data]));
const byKey = Object.fromEntries(run.rows.filter((r) => r.key).map((r) => [r.key, r]));
const fill = (text) =>
  text
    .replace(/\{piece:([\w-]+)\}/g, (_, id) =>
      pieces[id]
        ? `${pieces[id].json} per JSON run, ${pieces[id].png} per binary answer`
        : `(piece ${id}: not measured)`,
    )
    .replace(/\{bodies:([\w-]+)\}/g, (_, id) =>
      bodies[id]
        ? `${bodies[id].cpuPerGiB} CPU per GiB, bytes/s with it ÷ without ${bodies[id].bytesPerSecond}`
        : `(piece ${id}: not measured)`,
    )
    .replace(/\{row:([\w-]+)\}/g, (_, key) =>
      byKey[key] ? `${byKey[key].text.median} (${byKey[key].text.spread})` : `(${key}: not measured)`,
    )
    .replace(/\*\*/g, "")
    .replace(/^./, (c) => c.toUpperCase());

// Rows that share one text are written under it once.
const groups = new Map();
for (const r of targeted.filter((r) => r.verdict === "missed" || r.verdict === "undecided")) {
  const text = MISSES[r.key] ?? null;
  if (!text) problems.push(`no text in scripts/bench/misses.mjs for ${r.key ?? r.label}`);
  const id = text ?? r;
  if (!groups.has(id)) groups.set(id, []);
  groups.get(id).push(r);
}
const misses =
  [...groups]
    .map(([text, rows]) => {
      const figures = rows
        .map(
          (r) =>
            `- **${r.label}**${against(r)}: ${r.text.median} (${r.text.spread}), target ${r.text.target}: ${verdictText(r.verdict)}`,
        )
        .join("\n");
      if (text === rows[0]) return `${figures}\n\n  Not itemized in this run.`;
      return `${figures}\n\n  **What it costs.** ${fill(text.costs)}.\n  **What it buys.** ${fill(text.buys)}.\n  **The experiment that shows it.** ${fill(text.experiment)}.`;
    })
    .join("\n\n") || "Every target was met.";

// The run's printed sections, by their number ("## 1. Run path …" is section 1), headings one level down.
const blocks = {};
let current = null;
for (const line of printed.split("\n")) {
  const heading = /^## (\d+)\. /.exec(line);
  if (heading) current = heading[1];
  else if (/^## |^machine: /.test(line)) current = null;
  if (current === null) continue;
  (blocks[current] ??= []).push(line.replace(/^(#{2,5}) /, "#$1 "));
}
const output = (n) => {
  const block = blocks[n];
  if (!block) {
    problems.push(`section ${n} is not in the run's output`);
    return "_Not measured in this run._";
  }
  return block.join("\n").trim();
};

const doc = template
  .replace("{{run}}", runText.join("\n"))
  .replace("{{noise}}", noise)
  .replace("{{targets}}", targets)
  .replace("{{misses}}", misses)
  .replace(/\{\{output:(\d+)\}\}/g, (_, n) => output(n));
writeFileSync(to, doc);
console.error(`wrote ${to} from ${base}.json and ${base}.md`);
for (const p of problems) console.error(`check: ${p}`);
