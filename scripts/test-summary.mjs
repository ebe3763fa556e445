// Prints vitest's JSON results as one plain closing line: "tests: N passed, N failed[, N skipped]".
import { readFileSync } from "node:fs";

const results = JSON.parse(readFileSync(process.argv[2] ?? "artifacts/vitest.json", "utf8"));
const skipped = results.numPendingTests + results.numTodoTests;
console.log(
  `tests: ${results.numPassedTests} passed, ${results.numFailedTests} failed${skipped ? `, ${skipped} skipped` : ""}`,
);
process.exit(results.numFailedTests > 0 || results.numTotalTests === 0 ? 1 : 0);
