import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * SECURITY.md backs each claim with tests it names (`file` › "title", "title" …). A claim is only as
 * good as its test: every file it names exists and holds a test of every title it quotes (a title
 * ending in "…" is a prefix), so a renamed or deleted test cannot leave a claim standing on nothing.
 */
const CITATION = /`([\w./-]+\.test\.tsx?)`((?:\s*›\s*|\s*,\s*|\s+and\s+)"[^"]+"(?:\s*\([^)]*\))?)*/g;
const oneLine = (text: string) => text.replace(/\s+/g, " ");

function citations(markdown: string): { file: string; titles: string[] }[] {
  return [...markdown.matchAll(CITATION)].map((m) => ({
    file: m[1]!,
    titles: (m[0].match(/"[^"]+"/g) ?? []).map((t) => oneLine(t.slice(1, -1))),
  }));
}

/** Whether `source` has a test titled `title` (or starting with it), as a string literal may spell it. */
function hasTitle(source: string, title: string): boolean {
  const wanted = title.replace(/…$/, "");
  const text = oneLine(source);
  return [wanted, wanted.replace(/\\/g, "\\\\"), wanted.replace(/"/g, '\\"')].some((spelling) =>
    text.includes(spelling),
  );
}

describe("SECURITY.md", () => {
  const cited = citations(readFileSync("SECURITY.md", "utf8"));

  it("names tests, and every test it names exists in the file it names", () => {
    expect(cited.length).toBeGreaterThan(30);
    const missing: string[] = [];
    for (const { file, titles } of cited) {
      if (!existsSync(file)) {
        missing.push(`${file} (no such file)`);
        continue;
      }
      const source = readFileSync(file, "utf8");
      for (const title of titles) if (!hasTitle(source, title)) missing.push(`${file} › "${title}"`);
    }
    expect(missing).toEqual([]);
  });
});
