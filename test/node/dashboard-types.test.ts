import { readdirSync, readFileSync } from "node:fs";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/**
 * The dashboard derives the shapes it reads from the API's route schemas (src/dashboard/api-types.ts),
 * never copies them: a copy drifts silently when the API changes. The API's fields are snake_case and
 * the dashboard's own shapes camelCase, so a type literal or interface in src/dashboard with a
 * snake_case member is a hand-copied API shape, unless ALLOWED names its file, with the reason.
 */

const ROOT = new URL("../../", import.meta.url);

const ALLOWED: Record<string, string> = {
  "src/dashboard/throttle.ts": "a D1 row of the dashboard's own table (sign_in_attempts), not an API answer",
};

/** `file:line member` of each snake_case member of a type literal or interface in `source`. */
export function copiedShapes(path: string, source: string): string[] {
  const file = ts.createSourceFile(path, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TSX);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isTypeLiteralNode(node) || ts.isInterfaceDeclaration(node)) {
      for (const member of node.members) {
        const name = member.name?.getText(file).replace(/^["']|["']$/g, "");
        if (name && /^[a-z0-9]+(_[a-z0-9]+)+$/.test(name)) {
          found.push(`${path}:${file.getLineAndCharacterOfPosition(member.getStart(file)).line + 1} ${name}`);
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

const dashboardFiles = (): string[] =>
  readdirSync(new URL("src/dashboard/", ROOT), { recursive: true, encoding: "utf8" })
    .filter((name) => /\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name))
    .map((name) => `src/dashboard/${name}`)
    .sort();

describe("the dashboard's API shapes", () => {
  it("finds a hand-copied API shape, in an interface or inline", () => {
    const copied = [
      "interface ProjectSummary {\n  project_id: string;\n  name: string;\n}",
      'const list = await api<Page<{ user_id: string; "next_cursor": string }>>("GET", "/x");',
      "type Own = { requestId: string; fields: Record<string, string> };",
    ].join("\n");
    expect(copiedShapes("x.tsx", copied)).toEqual(["x.tsx:2 project_id", "x.tsx:5 user_id", "x.tsx:5 next_cursor"]);
  });

  it("are the routes' schemas, inferred, in every dashboard file", () => {
    const files = dashboardFiles();
    expect(files).toContain("src/dashboard/api-types.ts");
    const copied = files
      .filter((path) => !(path in ALLOWED))
      .flatMap((path) => copiedShapes(path, readFileSync(new URL(path, ROOT), "utf8")));
    expect(copied).toEqual([]);
  });

  it("allows only files that still need it", () => {
    const stale = Object.keys(ALLOWED).filter(
      (path) => copiedShapes(path, readFileSync(new URL(path, ROOT), "utf8")).length === 0,
    );
    expect(stale).toEqual([]);
  });
});
