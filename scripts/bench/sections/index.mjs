// Sections of `npm run bench` that other parts of the gateway add: one import and one entry each. A
// section is `{ id, title, async run(ctx) → { rows, notes } }`; `ctx` and `rows` are described in
// scripts/bench/README.md (rows are made with `figure()` from ../report.mjs, one value per repetition).
// run.mjs runs them after its own sections, each under the noise meter, and prints their rows with
// the others; `--sections=<id>` runs one alone.
import burst from "./burst.mjs";
import wait from "./wait.mjs";

export const sections = [wait, burst];
