import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The README is the front door and docs/ the reference behind it: every relative link between them
 * resolves (the file, and the heading when a link names one), and the README stays short and speaks of
 * the product, not of how it was built.
 */
const PAGES = [
  "README.md",
  "SECURITY.md",
  ...readdirSync("docs")
    .filter((f) => f.endsWith(".md"))
    .map((f) => join("docs", f)),
];
const README_MAX_BYTES = 16 * 1024;

/** Markdown without its fenced code blocks and inline code, where brackets are not links. */
const prose = (text: string) => text.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2 … */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading] of markdown.replace(/^```[\s\S]*?^```/gm, "").matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = heading!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every relative link of a page: [text](target) and <a href="target">, outside code. */
function linksOf(markdown: string): string[] {
  const text = prose(markdown);
  return [...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g), ...text.matchAll(/href="([^"]+)"/g)]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

describe("the documentation's links", () => {
  it("has pages to check", () => {
    expect(PAGES).toContain("docs/operations.md");
    expect(PAGES.length).toBeGreaterThan(5);
  });

  for (const page of PAGES) {
    it(`${page}: every relative link resolves, its heading too`, () => {
      const broken: string[] = [];
      for (const link of linksOf(readFileSync(page, "utf8"))) {
        const [path = "", anchor] = link.split("#");
        const target = path === "" ? page : join(dirname(page), decodeURIComponent(path));
        if (!existsSync(target)) {
          broken.push(`${link} (no ${relative(".", target)})`);
          continue;
        }
        if (
          anchor !== undefined &&
          statSync(target).isFile() &&
          target.endsWith(".md") &&
          !anchorsOf(readFileSync(target, "utf8")).has(anchor)
        ) {
          broken.push(`${link} (no heading #${anchor} in ${relative(".", target)})`);
        }
      }
      expect(broken).toEqual([]);
    });
  }

  // A page that names a file the code no longer has sends the reader looking for nothing (files move
  // when the code is restructured); globs and placeholders (`src/**/*.test.ts`, `{name}`) are not files.
  for (const page of PAGES) {
    it(`${page}: every file of the repository it names in code exists`, () => {
      const named = [
        ...readFileSync(page, "utf8").matchAll(/`((?:src|scripts|test|examples|packages|migrations)\/[\w./-]*)`/g),
      ].map((m) => m[1]!);
      expect(named.filter((path) => !existsSync(path))).toEqual([]);
    });
  }

  it("computes anchors as GitHub does", () => {
    const anchors = anchorsOf(
      "# Cost in `npm run bench`\n## Soak: nothing lost\n## Soak: nothing lost\n```\n# not a heading\n```\n",
    );
    expect([...anchors]).toEqual(["cost-in-npm-run-bench", "soak-nothing-lost", "soak-nothing-lost-1"]);
  });
});

describe("the README", () => {
  const readme = readFileSync("README.md", "utf8");

  it(`is at most ${README_MAX_BYTES} bytes`, () => {
    expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(README_MAX_BYTES);
  });

  it("speaks of the product, not of how it was built", () => {
    for (const word of [/\bissues?\b/i, /\bwaves?\b/i, /\.\.\/shared/, /DESIGN\.md/, /\bdepartures?\b/i]) {
      expect(readme).not.toMatch(word);
    }
  });

  it("gives the two commands and maps every page of docs/", () => {
    expect(readme).toContain("```sh\nnpm install\nnpm test");
    for (const doc of readdirSync("docs").filter((f) => f.endsWith(".md"))) expect(readme).toContain(`(docs/${doc})`);
  });
});
