import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { join } from "node:path";
import { cruise, type ICruiseResult } from "dependency-cruiser";
import { afterAll, describe, expect, it } from "vitest";

const rules = createRequire(import.meta.url)("../../.dependency-cruiser.cjs") as { forbidden: unknown[] };
let dir: string | undefined;
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function violationsIn(files: Record<string, string>) {
  dir = await mkdtemp(join(tmpdir(), "layering-"));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(dir, path, ".."), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  const result = await cruise(["src"], {
    baseDir: dir,
    ruleSet: { forbidden: rules.forbidden } as never,
    tsPreCompilationDeps: true,
    validate: true,
  });
  return (result.output as ICruiseResult).summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
}

describe("the layering rules (npm run lint)", () => {
  it("fail an import that points up or sideways, and pass one that points down", async () => {
    const violations = await violationsIn({
      "src/platform/cache.ts": 'import { hosts } from "../domains/lookup";\nexport const cache = hosts;\n',
      "src/domains/lookup.ts": 'import { RUN_BASE } from "../runs/path";\nexport const hosts = RUN_BASE;\n',
      "src/runs/path.ts": 'import { ok } from "../platform/ok";\nexport const RUN_BASE = ok;\n',
      "src/platform/ok.ts": "export const ok = 1;\n",
      "src/builds/index.ts": 'import { worker } from "../worker";\nexport const b = worker;\n',
      "src/worker.ts": 'import { RUN_BASE } from "./runs/path";\nexport const worker = RUN_BASE;\n',
    });
    expect(violations.sort()).toEqual([
      "ground-floor-stays-down: src/platform/cache.ts → src/domains/lookup.ts",
      // platform → domains → runs → platform: a loop of folders too.
      "no-cycles-between-folders: src/domains → src/runs",
      "no-cycles-between-folders: src/platform → src/domains",
      "no-cycles-between-folders: src/runs → src/platform",
      "no-sideways-into-runs: src/domains/lookup.ts → src/runs/path.ts",
      "nothing-imports-the-root: src/builds/index.ts → src/worker.ts",
    ]);
  });

  it("fail a loop between two folders that no single module closes", async () => {
    const violations = await violationsIn({
      "src/auth/access.ts": 'import { roleOf } from "../members/store";\nexport const access = roleOf;\n',
      "src/members/store.ts": 'import { ok } from "../platform/ok";\nexport const roleOf = ok;\n',
      "src/members/index.ts": 'import { token } from "../auth/tokens";\nexport const members = token;\n',
      "src/auth/tokens.ts": 'import { ok } from "../platform/ok";\nexport const token = ok;\n',
      "src/platform/ok.ts": "export const ok = 1;\n",
    });
    expect(violations.sort()).toEqual([
      "no-cycles-between-folders: src/auth → src/members",
      "no-cycles-between-folders: src/members → src/auth",
    ]);
  });
});
