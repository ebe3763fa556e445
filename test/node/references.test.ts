import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import ignore from "ignore";
import { describe, expect, it } from "vitest";

/**
 * A comment, a document or a configuration that names a file sends its reader there: the file must
 * exist in the repository. A path with a folder (`runs/admit.ts`, `src/usage/record.ts`) must be the
 * end of a tracked file's path; a bare name (`admit.ts`, `usage.md`) must be some tracked file's name.
 * In code only comments are read (a string, or a call such as `response.json()`, is code); documents and
 * configurations are read whole.
 *
 * The repository's files are read from the tree, not from git: the tree without what `.gitignore`
 * leaves out (installed packages, builds, local settings) is what git tracks, in a clone and in a
 * source archive (`git archive`, which has no `.git`) alike. `.ci/run` runs the suite from an archive too.
 */

const ROOT = new URL("../../", import.meta.url);

/** Every file of the tree under `ROOT` that `.gitignore` does not leave out, as git names it (`src/index.ts`). */
export function repositoryFiles(): string[] {
  const ignored = ignore()
    .add(readFileSync(new URL(".gitignore", ROOT), "utf8"))
    .add(".git");
  const files: string[] = [];
  const walk = (folder: string) => {
    for (const entry of readdirSync(new URL(folder || ".", ROOT), { withFileTypes: true })) {
      const path = `${folder}${entry.name}`;
      if (entry.isDirectory()) {
        if (!ignored.ignores(`${path}/`)) walk(`${path}/`);
      } else if (entry.isFile() && !ignored.ignores(path)) files.push(path);
    }
  };
  walk("");
  return files.sort();
}

const tracked = repositoryFiles();
const names = new Set(tracked.map((file) => file.split("/").pop()!));

/** Files a reader's own commands write (`curl -o` in an example), named in examples: not the repository's. */
const READERS_FILES: Record<string, string[]> = {
  "docs/runs.md": ["hello.png"],
  "docs/webhook-receivers.md": ["body.json"],
};

/** A file name: an optional folder path, a name and one of the extensions the repository uses (not a call: `x.json()`). */
const REFERENCE =
  /(?<![\w./@-])((?:\.{1,2}\/)*(?:[\w@-][\w.@-]*\/)*[\w-][\w.-]*\.(?:ts|tsx|mjs|cjs|js|md|toml|sql|json|png|html))(?![\w/(-])/g;

/** The comments of a code file, each with the line it starts on; strings are skipped so that `//` in one is not a comment. */
function commentsOf(text: string): { text: string; line: number }[] {
  const comments: { text: string; line: number }[] = [];
  const tokens = /\/\*[\s\S]*?\*\/|\/\/[^\n]*|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)/g;
  for (const token of text.matchAll(tokens)) {
    if (token[1] === undefined) comments.push({ text: token[0], line: text.slice(0, token.index).split("\n").length });
  }
  return comments;
}

function exists(reference: string): boolean {
  const path = reference.replace(/^(\.\.?\/)+/, "");
  if (!path.includes("/")) return names.has(path);
  return tracked.some((file) => file === path || file.endsWith(`/${path}`));
}

/** Every reference to a file that is not in the repository, as `file:line: reference`. */
export function missingReferences(): string[] {
  const missing: string[] = [];
  const read = tracked.filter(
    (file) => /\.(ts|tsx|mjs|cjs|js|md|toml)$/.test(file) && file !== "worker-configuration.d.ts",
  );
  for (const file of read) {
    const text = readFileSync(new URL(file, ROOT), "utf8");
    const whole = /\.(md|toml|cjs)$/.test(file);
    for (const part of whole ? [{ text, line: 1 }] : commentsOf(text)) {
      for (const match of part.text.matchAll(REFERENCE)) {
        const reference = match[1]!;
        if (exists(reference) || READERS_FILES[file]?.includes(reference)) continue;
        const line = part.line + part.text.slice(0, match.index).split("\n").length - 1;
        missing.push(`${file}:${line}: ${reference}`);
      }
    }
  }
  return missing;
}

describe("references to files", () => {
  it("name only files the repository has, in comments, documents and configuration", () => {
    expect(missingReferences()).toEqual([]);
  });

  // In a clone (a source archive has no `.git`): the tree read without git misses nothing git tracks.
  it.runIf(existsSync(new URL(".git", ROOT)))("read the tree as git tracks it: no tracked file is missed", () => {
    const byGit = execFileSync("git", ["ls-files"], { cwd: ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
    const read = new Set(tracked);
    expect(byGit.filter((file) => !read.has(file))).toEqual([]);
  });

  it("are found in a comment, and not in a string of code", () => {
    const comments = commentsOf('const a = "see gone.ts"; // see src/usage/recording.ts\n/* and DESIGN.md */');
    const found = comments.flatMap((c) => [...c.text.matchAll(REFERENCE)].map((m) => m[1]));
    expect(found).toEqual(["src/usage/recording.ts", "DESIGN.md"]);
    expect(found.filter((reference) => !exists(reference!))).toEqual(["src/usage/recording.ts", "DESIGN.md"]);
    expect(exists("usage/record.ts")).toBe(true);
  });
});
