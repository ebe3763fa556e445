import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * One word per idea (docs/architecture.md, "Glossary"): the glossary is the single source of the words.
 * An entry's line `*Words*: … ; *only in*: …` gives words that are that idea's and the folders or files
 * (under `src/`) where the idea lives; `*Not said*: …` gives other words for an idea that no folder uses;
 * `*kept*: …` gives names callers or stored data already read, which stay. Every source file of `src/`
 * but its tests (which keep older words, as the glossary says of "upstream") is read, code and comments
 * alike, with identifiers split into words (`handOff`, `HAND_OFF_TRIES` and `hand-off` all say "hand
 * off"); a word found outside its places is a fault, unless ALLOWED names the file or its folder for
 * it, with the reason. An allowance no longer needed is a fault too, so that the list only shrinks.
 */

const ROOT = new URL("../../", import.meta.url);

export interface WordRule {
  /** The glossary entry's name (`run target`). */
  idea: string;
  /** The word's forms as the glossary writes them (`hand over`, `handed over`). */
  words: string[];
  /** Path prefixes under `src/` where they may be said; `null` for a word no folder says. */
  onlyIn: string[] | null;
  /** Exact strings left out before reading (names callers already read). */
  kept: string[];
}

const codeSpans = (text: string) => [...text.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);

/** The rules of the glossary section of `markdown`. */
export function glossaryRules(markdown: string): WordRule[] {
  const section = /^## Glossary\n([\s\S]*?)(?=^## )/m.exec(markdown)?.[1] ?? "";
  const rules: WordRule[] = [];
  for (const entry of section.split(/^- (?=\*\*)/m).slice(1)) {
    const text = entry.replace(/\s*\n\s*/g, " ");
    // The idea an entry names in bold (an entry may name two: "hand on" and "deliver").
    const ideas = [...text.matchAll(/\*\*([^*]+)\*\*/g)].map((match) => match[1]!);
    for (const line of text.matchAll(/\*(Words|Not said)\*: (.*?)(?=\*(?:Words|Not said)\*:|$)/g)) {
      const [words = "", ...fields] = line[2]!.split(/; \*/);
      const field = (name: string) => fields.find((f) => f.startsWith(`${name}*:`));
      const onlyIn = field("only in");
      const forms = codeSpans(words);
      rules.push({
        idea: ideas.find((idea) => forms.includes(idea)) ?? ideas[0]!,
        words: forms,
        onlyIn: line[1] === "Words" ? codeSpans(onlyIn ?? "") : null,
        kept: codeSpans(field("kept") ?? ""),
      });
    }
  }
  return rules;
}

/** `text` as words: identifiers split (`handOver`, `HAND_OFF`, `hand-off` → `hand over`, `hand off`), lower case. */
export function wordsOf(text: string): string {
  return text
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .replace(/[_-]+/g, " ")
    .toLowerCase();
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A form's pattern over `wordsOf` text: its words in order, with or without space between them. */
const formPattern = (form: string) => new RegExp(`\\b${wordsOf(form).split(/\s+/).map(escape).join("\\s*")}\\b`);

export interface Fault {
  file: string;
  line: number;
  word: string;
  idea: string;
}

/** Where `text` (the file `file`, its path under `src/`) says a word of `rules` outside that word's places. */
export function faultsIn(file: string, text: string, rules: WordRule[]): Fault[] {
  const faults: Fault[] = [];
  for (const rule of rules) {
    if (rule.onlyIn?.some((place) => file === place || file.startsWith(place))) continue;
    let read = text;
    for (const kept of rule.kept) read = read.split(kept).join(" ");
    const patterns = rule.words.map(formPattern);
    read.split("\n").forEach((line, index) => {
      const words = wordsOf(line);
      if (patterns.some((pattern) => pattern.test(words)))
        faults.push({ file, line: index + 1, word: rule.words[0]!, idea: rule.idea });
    });
  }
  return faults;
}

/**
 * Files (or folders, ending in `/`) under `src/` allowed a glossary word (its first form) for another
 * idea, with the reason. Kept short: every entry is a word not yet renamed, or another field's own word.
 */
const AUDIT = "an audit entry's target (`target: {type, id}`), a field of the audit API";
const DNS = "a DNS record's target (a CNAME's), DNS's word, and the domain error code WRONG_TARGET";
const ALLOWED: Record<string, Record<string, string>> = {
  "audit/": { target: AUDIT },
  "dashboard/pages/audit-log.tsx": { target: AUDIT },
  "domains/": { target: DNS },
  "dashboard/pages/domain-parts.tsx": { target: DNS },
  "db/schema.ts": { target: `${DNS}; the async_runs column \`target\` (stored data: its field is \`appUrl\`)` },
  // A keeper's record of a run in flight keeps the app's URL under the name it was stored with.
  "runs/wait/keeper.ts": {
    target: "a keeper record's stored field `target` (records of runs in flight at an upgrade)",
  },
  // Libraries' own words: drizzle's conflict target, zod-openapi's validation target.
  "auth/users.ts": { target: "drizzle's `onConflictDoUpdate({ target })`" },
  "webhooks/receiver-api.ts": { target: "drizzle's `onConflictDoUpdate({ target })`" },
  "webhooks/receiver-settings.ts": { target: "drizzle's `onConflictDoUpdate({ target })`" },
  "platform/router.ts": { target: "zod-openapi's validation `target` (param, query, json…)" },
};

function sourceFiles(folder = ""): string[] {
  return readdirSync(new URL(`src/${folder}`, ROOT), { withFileTypes: true }).flatMap((entry) => {
    const path = `${folder}${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(`${path}/`);
    return /\.(ts|tsx)$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

const allowanceOf = (file: string, word: string) =>
  Object.keys(ALLOWED).find((place) => (file === place || file.startsWith(place)) && ALLOWED[place]![word]);

const rules = glossaryRules(readFileSync(new URL("docs/architecture.md", ROOT), "utf8"));

describe("one word per idea (the glossary, docs/architecture.md)", () => {
  it("reads its words from the glossary", () => {
    const ideas = new Set(rules.map((rule) => rule.idea));
    expect([...ideas]).toEqual(
      expect.arrayContaining(["deliver", "deployment", "hand on", "hand-over", "lane", "run", "run target"]),
    );
    for (const rule of rules) expect(rule.words.length, rule.idea).toBeGreaterThan(0);
    const places = rules.flatMap((rule) => rule.onlyIn ?? []);
    const files = sourceFiles();
    for (const place of places)
      expect(
        files.some((file) => file.startsWith(place)),
        place,
      ).toBe(true);
  });

  it("are said in src/ only for their idea", () => {
    const found: string[] = [];
    const used = new Set<string>();
    for (const file of sourceFiles()) {
      const text = readFileSync(new URL(`src/${file}`, ROOT), "utf8");
      for (const fault of faultsIn(file, text, rules)) {
        const place = allowanceOf(fault.file, fault.word);
        if (place) used.add(`${place} ${fault.word}`);
        else found.push(`src/${fault.file}:${fault.line}: "${fault.word}" (the glossary's ${fault.idea})`);
      }
    }
    expect(found).toEqual([]);
    const unused = Object.entries(ALLOWED).flatMap(([place, words]) =>
      Object.keys(words)
        .filter((word) => !used.has(`${place} ${word}`))
        .map((word) => `${place} ${word}`),
    );
    expect(unused, "allowances no longer needed: remove them").toEqual([]);
  });

  it("finds a word of another idea in code and comments, and passes the word's own places and kept names", () => {
    const rule: WordRule[] = [
      { idea: "hand-over", words: ["hand over", "handed over"], onlyIn: ["runs/wait/"], kept: [] },
      { idea: "deployment", words: ["upstream"], onlyIn: null, kept: ["Upstream failed"] },
    ];
    const text = [
      "export type HandOver = 1;",
      "// a delivery handed over to its lane",
      "const HAND_OVER_TRIES = 3;",
      'const title = "Upstream failed";',
      "const upstreamUrl = 1;",
    ].join("\n");
    expect(faultsIn("webhooks/enqueue.ts", text, rule).map((f) => `${f.line} ${f.word}`)).toEqual([
      "1 hand over",
      "2 hand over",
      "3 hand over",
      "5 upstream",
    ]);
    expect(faultsIn("runs/wait/keeper.ts", text, rule).map((f) => `${f.line} ${f.word}`)).toEqual(["5 upstream"]);
    expect(wordsOf("LANE_HAND_OFF_TIMEOUT_MS handOnResult hand-off.ts URLTarget")).toBe(
      "lane hand off timeout ms hand on result hand off.ts url target",
    );
  });
});
