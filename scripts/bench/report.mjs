// How every figure of the bench is printed: one value per repetition, shown as its median and its
// spread (min–max), and judged against its target only as far as the spread allows. A target is met
// when every repetition meets it, missed when none does, and undecided when the spread straddles it: on
// a noisy machine that is the honest answer. Every row with a target is also kept for the summary that
// `npm run bench` prints last, so all targets read side by side.

const summary = [];
// Every row printed and every extra table, for the JSON of a run (`--out`, then scripts/bench/doc.mjs).
const recorded = { rows: [], extras: [] };

const finite = (values) => values.filter((v) => v !== null && v !== undefined && Number.isFinite(v));

export function median(values) {
  const sorted = finite(values).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The p-th percentile (0–100, nearest rank) of `values`, or null when there are none. */
export function percentile(values, p) {
  const sorted = finite(values).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const holds = ([op, bound], v) => (op === ">=" ? v >= bound : v <= bound);
const opText = { ">=": "≥", "<=": "≤" };

/** "met", "missed" or "undecided" for the values of one row against `target` ([op, bound]). */
export function verdict(values, target) {
  const vs = finite(values);
  if (!target || vs.length === 0) return null;
  const hits = vs.filter((v) => holds(target, v)).length;
  if (hits === vs.length) return "met";
  if (hits === 0) return "missed";
  return "undecided";
}

const UNITS = {
  x: "×",
  ms: " ms",
  "ms/GiB": " ms/GiB",
  MiB: " MiB",
  "MiB/s": " MiB/s",
  "req/s": " req/s",
  "/s": "/s",
  "%": " %",
};

/** `n` with its unit; differences (signed: true) carry their sign. */
export function show(n, { unit = "", digits = 2, signed = false } = {}) {
  if (n === null || n === undefined || !Number.isFinite(n)) return "–";
  const text = n.toFixed(digits);
  return `${signed && n >= 0 ? "+" : ""}${text}${UNITS[unit] ?? (unit ? ` ${unit}` : "")}`;
}

/**
 * One row: `label`, one value per repetition, and how to read it. `target`: [">=" | "<=", bound] in
 * the row's own unit; `signed` prints differences with their sign; `vs` names what the row is
 * measured against; `note` is printed after the verdict; `key` names a row with a target for
 * scripts/bench/doc.mjs (what its miss costs and buys is written there under that key); `cost` marks
 * a difference that is a cost, printed "below noise" when any repetition measured it at or below zero.
 */
export function figure(
  label,
  values,
  { unit = "", digits = 2, target = null, signed = false, vs = "", note = "", key = null, cost = false } = {},
) {
  return { label, values: finite(values), unit, digits, target, signed, vs, note, key, cost };
}

/** A cost row (`cost: true`) that some repetition measured at or below zero is below the noise. */
const belowNoise = (row) => row.cost && row.values.some((v) => v <= 0);

/** The median of a row as printed: its value, or "below noise" for such a cost. */
const middle = (row) => (belowNoise(row) ? "below noise" : show(median(row.values), row));

/** The spread of a row: "0.81 … 0.93×", the single value with "(1 rep)", or a cost below noise's half-width. */
export function spread(row) {
  const vs = row.values;
  if (vs.length === 0) return "–";
  if (belowNoise(row))
    return `differences within ±${show(Math.max(...vs.map(Math.abs)), { ...row, signed: false })}${vs.length === 1 ? " (1 rep)" : ""}`;
  const fmt = (v) => show(v, row);
  if (vs.length === 1) return `${fmt(vs[0])} (1 rep)`;
  return `${fmt(Math.min(...vs))} … ${fmt(Math.max(...vs))}`;
}

const verdictText = (v) => (v === "missed" ? "**missed**" : v === "undecided" ? "_undecided_" : (v ?? ""));

function rowLine(row) {
  const v = verdict(row.values, row.target);
  const target = row.target ? `${opText[row.target[0]]} ${show(row.target[1], { ...row, signed: row.signed })}` : "";
  return `| ${row.label} | **${middle(row)}** | ${spread(row)} | ${row.vs} | ${target} | ${verdictText(v)}${row.note ? ` ${row.note}` : ""} |`;
}

/** Prints `rows` as one table under `title`; keeps the rows with a target for the summary. */
export function printRows(title, rows, { section = title } = {}) {
  if (title) console.log(`\n${title}\n`);
  console.log("| figure | median | min … max over reps | against | target | verdict |");
  console.log("|---|---:|---:|---|---|---|");
  for (const row of rows) {
    console.log(rowLine(row));
    if (row.target) summary.push({ section, row });
    const vs = row.values;
    recorded.rows.push({
      section,
      ...row,
      median: median(vs),
      min: vs.length ? Math.min(...vs) : null,
      max: vs.length ? Math.max(...vs) : null,
      verdict: verdict(vs, row.target),
      text: { median: middle(row), spread: spread(row), target: row.target ? targetText(row) : "" },
    });
  }
}

const targetText = (row) => `${opText[row.target[0]]} ${show(row.target[1], row)}`;

/** Keeps `data` under `kind` for the run's JSON (a table printed by hand, such as the pieces measured alone). */
export function keep(kind, data) {
  recorded.extras.push({ kind, data });
}

/** Everything recorded so far: what `--out` writes as JSON. */
export const recordedFigures = () => recorded;

/**
 * A piece's cost: `withIt` and `without` one value per repetition (CPU per run, say), paired by
 * repetition. Below the noise (some repetition at or below zero, or the median inside the spread of
 * the differences around zero) it reads "below noise" with the spread's half-width, never a negative
 * or a zero cost; above it, the median difference and its min–max.
 */
export function cost(withIt, without, { unit = "ms", digits = 3 } = {}) {
  const diffs = withIt.map((w, i) => w - without[i]).filter(Number.isFinite);
  if (diffs.length === 0) return "not measured";
  const lo = Math.min(...diffs);
  const hi = Math.max(...diffs);
  if (lo <= 0)
    return `below noise (differences within ±${show(Math.max(Math.abs(lo), Math.abs(hi)), { unit, digits })})`;
  const m = median(diffs);
  if (diffs.length === 1) return `${show(m, { unit, digits, signed: true })} (1 rep)`;
  return `**${show(m, { unit, digits, signed: true })}** (${show(lo, { unit, digits })} … ${show(hi, { unit, digits })})`;
}

/** Every row with a target, in the order printed, side by side: what `npm run bench` prints last. */
export function printSummary() {
  if (summary.length === 0) return;
  const counts = { met: 0, missed: 0, undecided: 0 };
  console.log("\n## Targets, side by side (every row above that has one)\n");
  console.log("| section | figure | median | min … max over reps | target | verdict |");
  console.log("|---|---|---:|---:|---|---|");
  for (const { section, row } of summary) {
    const v = verdict(row.values, row.target);
    if (v) counts[v]++;
    console.log(
      `| ${section} | ${row.label}${row.vs ? ` (against ${row.vs})` : ""} | **${middle(row)}** | ${spread(row)} | ${opText[row.target[0]]} ${show(row.target[1], row)} | ${verdictText(v)} |`,
    );
  }
  console.log(`\n${counts.met} met, ${counts.missed} missed, ${counts.undecided} undecided.`);
}
