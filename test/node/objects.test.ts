import { readdirSync, readFileSync } from "node:fs";
import { parse } from "smol-toml";
import { describe, expect, it } from "vitest";

/**
 * One way per platform object (docs/architecture.md, "Durable Objects"): each Durable Object class is
 * addressed by one function in its own folder, and every caller, tests included, goes through it. The
 * rule is read from the sources: a binding's `get`, or any namespace's `idFromName`, `idFromString`,
 * `newUniqueId` or `getByName`, anywhere but inside its class's addressing function fails it.
 */

const ROOT = new URL("../../", import.meta.url);

/** Each class of wrangler.toml, and the one function that addresses its objects. */
const ADDRESSING: Record<string, { file: string; fn: string }> = {
  WebhookLane: { file: "src/webhooks/message.ts", fn: "laneObject" },
  WebhookReceiverTask: { file: "src/webhooks/receiver-tasks.ts", fn: "receiverTaskObject" },
  UsageLedger: { file: "src/usage/ledger-client.ts", fn: "ledgerOf" },
  RunKeeper: { file: "src/runs/wait/shard.ts", fn: "keeperObject" },
  RunFollowers: { file: "src/runs/async/followers.ts", fn: "followersObject" },
  DeliveryLog: { file: "src/webhooks/log.ts", fn: "deliveryLogObject" },
};

interface Binding {
  name: string;
  class_name: string;
}

const bindings = (
  parse(readFileSync(new URL("wrangler.toml", ROOT), "utf8")) as unknown as { durable_objects: { bindings: Binding[] } }
).durable_objects.bindings;

/** The sources that may address an object: the gateway's and its tests' (this file's samples aside). */
function sources(): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (folder: string) => {
    for (const entry of readdirSync(new URL(folder, ROOT), { withFileTypes: true })) {
      const path = `${folder}${entry.name}`;
      if (entry.isDirectory()) walk(`${path}/`);
      else if (/\.(ts|tsx|mts|js|mjs)$/.test(entry.name) && path !== "test/node/objects.test.ts")
        files[path] = readFileSync(new URL(path, ROOT), "utf8");
    }
  };
  walk("src/");
  walk("test/");
  return files;
}

/** Where `fn` is declared in `text` (`const fn =` … its first `;`), or null. */
function spanOf(text: string, fn: string): [number, number] | null {
  const start = text.search(new RegExp(`(?:const|function)\\s+${fn}\\b`));
  if (start < 0) return null;
  const end = text.indexOf(";", start);
  return [start, end < 0 ? text.length : end];
}

/** Every place in `files` that addresses an object outside its class's function, as `path:line: code`. */
export function strayAddresses(files: Record<string, string>, names: Binding[]): string[] {
  const addressing = new Map(names.map((b) => [b.name, ADDRESSING[b.class_name]]));
  const known = names.map((b) => b.name).join("|");
  const call = new RegExp(
    `\\b(?:(${known})\\s*\\.\\s*get\\s*\\(|(?:(${known})\\s*\\.\\s*)?(?:idFromName|idFromString|newUniqueId|getByName)\\s*\\()`,
    "g",
  );
  const stray: string[] = [];
  for (const [path, text] of Object.entries(files)) {
    for (const match of text.matchAll(call)) {
      const binding = match[1] ?? match[2];
      const at = match.index;
      // Dotted names only: a fake namespace's own `idFromName(name) {` or `idFromName: ` is no call of one.
      if (!binding && text[at - 1] !== ".") continue;
      const inside = [...addressing].some(
        ([name, place]) =>
          place &&
          place.file === path &&
          (binding === undefined || binding === name) &&
          ((span) => span !== null && at >= span[0] && at <= span[1])(spanOf(text, place.fn)),
      );
      if (!inside) {
        const line = text.slice(0, at).split("\n").length;
        stray.push(`${path}:${line}: ${text.split("\n")[line - 1]!.trim()}`);
      }
    }
  }
  return stray;
}

describe("one way to address each Durable Object class", () => {
  it("names one addressing function for every class of wrangler.toml, and each is where it is named", () => {
    expect(bindings.map((b) => b.class_name).sort()).toEqual(Object.keys(ADDRESSING).sort());
    for (const b of bindings) {
      const { file, fn } = ADDRESSING[b.class_name]!;
      const text = readFileSync(new URL(file, ROOT), "utf8");
      const span = spanOf(text, fn);
      expect(span, `${fn} in ${file}`).not.toBeNull();
      expect(text.slice(...span!), `${fn} addresses ${b.name}`).toContain(`${b.name}.get(`);
    }
  });

  it("finds no object addressed outside its class's function, in the gateway or its tests", () => {
    expect(strayAddresses(sources(), bindings)).toEqual([]);
  });

  it("would find an object addressed inline, through another class's function, or by another namespace call", () => {
    const keeper =
      "export const keeperObject = (env: Env, name: string) => env.RUN_KEEPER.get(env.RUN_KEEPER.idFromName(name));\n";
    const files = {
      "src/runs/wait/shard.ts": keeper,
      // Inline, as wait.ts did.
      "src/runs/wait/wait.ts":
        "const keeper = scope.env.RUN_KEEPER.get(\n  scope.env.RUN_KEEPER.idFromName(name),\n);\n",
      // Another class's binding inside the keeper's function.
      "src/webhooks/message.ts": "export const laneObject = (env: Env, name: string) => env.RUN_KEEPER.get(id);\n",
      // A namespace held under another name.
      "test/helpers.ts": "const ns = env.USAGE_LEDGER;\nconst ledger = ns.get(ns.newUniqueId());\n",
      // A fake namespace's own method is no call.
      "test/runs.ts": "const fake = { idFromName: (name: string) => name, get: () => ({}) };\n",
    };
    expect(strayAddresses(files, bindings)).toEqual([
      "src/runs/wait/wait.ts:1: const keeper = scope.env.RUN_KEEPER.get(",
      "src/runs/wait/wait.ts:2: scope.env.RUN_KEEPER.idFromName(name),",
      "src/webhooks/message.ts:1: export const laneObject = (env: Env, name: string) => env.RUN_KEEPER.get(id);",
      "test/helpers.ts:2: const ledger = ns.get(ns.newUniqueId());",
    ]);
  });
});
