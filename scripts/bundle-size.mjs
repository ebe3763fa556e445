// Prints the size of the built Worker bundle, raw and gzipped (the figure Workers' size limit counts).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

const dir = process.argv[2] ?? "dist";
let raw = 0;
let gzip = 0;
for (const name of readdirSync(dir)) {
  const path = join(dir, name);
  if (!statSync(path).isFile() || name.endsWith(".map")) continue;
  const bytes = readFileSync(path);
  raw += bytes.length;
  gzip += gzipSync(bytes, { level: 9 }).length;
}
const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
console.log(`bundle: ${kib(raw)} raw, ${kib(gzip)} gzip (Workers limit: 3 MiB gzip on Free, 10 MiB on Paid)`);
if (raw === 0) process.exit(1);
