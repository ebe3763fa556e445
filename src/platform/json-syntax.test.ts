import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { JSON_MAX_DEPTH, JsonSyntaxCheck, jsonSyntaxOf, jsonTextSyntaxOf } from "./json-syntax";

const utf8 = (text: string) => new TextEncoder().encode(text);

/** `JSON.parse`'s verdict on text. */
function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** `JSON.parse`'s verdict on bytes that must be UTF-8 (a leading byte order mark passed over, as `TextDecoder` does). */
function parsesBytes(bytes: Uint8Array): boolean {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    return false;
  }
  return parses(text);
}

const VALID = [
  "{}",
  "[]",
  "0",
  "-0",
  "1.5e+10",
  "-12.0E-3",
  "1E5",
  '""',
  '"\\u00e9\\uD834\\uDD1E\\ud800"',
  '"\\"\\\\\\/\\b\\f\\n\\r\\t"',
  "true",
  "false",
  "null",
  ' \t\r\n{"a" : [1 , {"b":null}] }\n ',
  '{"":""}',
  "[[[]]]",
  '"é😀"',
  '{"a":1,"a":2}',
  "[-1e-0]",
];
const INVALID = [
  "",
  " ",
  "{",
  "}",
  "[",
  "[1,]",
  "[,1]",
  "{,}",
  '{"a"}',
  '{"a":}',
  '{"a":1,}',
  "{a:1}",
  "{'a':1}",
  "01",
  "-01",
  "1.",
  ".5",
  "-",
  "1e",
  "1e+",
  "+1",
  "0x10",
  "NaN",
  "Infinity",
  "tru",
  "nul",
  "truex",
  "[true false]",
  '"\\x"',
  '"\\u12"',
  '"\\u12G4"',
  '"a\u0001"',
  '"\n"',
  "[1]]",
  "{}{}",
  "1 2",
  '"abc',
  "/*c*/1",
  "[1,2",
  '{"a":1',
  "\u00a01",
  "\ufeff{}",
];

describe("JSON syntax check", () => {
  it.each(VALID)("accepts %j", (text) => {
    expect(parses(text)).toBe(true);
    expect(jsonTextSyntaxOf(text).valid).toBe(true);
    expect(jsonSyntaxOf(utf8(text)).valid).toBe(true);
  });

  it.each(INVALID)("refuses %j", (text) => {
    expect(parses(text)).toBe(false);
    expect(jsonTextSyntaxOf(text).valid).toBe(false);
  });

  it("names the top level", () => {
    expect(jsonTextSyntaxOf('{"a":[1]}')).toEqual({ valid: true, root: "object" });
    expect(jsonTextSyntaxOf(" [{}]")).toEqual({ valid: true, root: "array" });
    expect(jsonTextSyntaxOf('"x"')).toEqual({ valid: true, root: "string" });
    expect(jsonTextSyntaxOf("-3")).toEqual({ valid: true, root: "number" });
    expect(jsonTextSyntaxOf("null")).toEqual({ valid: true, root: "literal" });
  });

  it("says where and why a text is not JSON", () => {
    expect(jsonTextSyntaxOf('{"a":1,}')).toEqual({
      valid: false,
      reason: "an object whose key is not a string",
      offset: 7,
    });
    expect(jsonTextSyntaxOf("[1")).toMatchObject({ valid: false, reason: "a text that ends too soon" });
  });

  it("bounds nesting at 1000 levels", () => {
    expect(JSON_MAX_DEPTH).toBe(1000);
    const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;
    expect(jsonTextSyntaxOf(nested(JSON_MAX_DEPTH)).valid).toBe(true);
    expect(jsonTextSyntaxOf(nested(JSON_MAX_DEPTH + 1))).toMatchObject({
      valid: false,
      reason: `nesting deeper than ${JSON_MAX_DEPTH} levels`,
      offset: JSON_MAX_DEPTH,
    });
    expect(jsonTextSyntaxOf(`{"a":${nested(1_000_000)}}`).valid).toBe(false);
  });

  it("takes bytes as well-formed UTF-8 only, and a leading byte order mark", () => {
    expect(jsonSyntaxOf(Uint8Array.of(0xef, 0xbb, 0xbf, 0x7b, 0x7d)).valid).toBe(true);
    for (const bad of [
      [0xc0, 0x80],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
      [0xe2, 0x82],
      [0x80],
      [0xff],
      [0xf0, 0x8f, 0xbf, 0xbf],
    ]) {
      expect(jsonSyntaxOf(Uint8Array.of(0x22, ...bad, 0x22)).valid, bad.join(",")).toBe(false);
    }
    expect(jsonSyntaxOf(Uint8Array.of(0x22, 0xf0, 0x9f, 0x98, 0x80, 0x22)).valid).toBe(true);
  });

  it("agrees with JSON.parse on any JSON value", () => {
    fc.assert(
      fc.property(fc.json({ depthSize: "medium" }), (text) => {
        const verdict = jsonTextSyntaxOf(text);
        expect(verdict.valid).toBe(true);
        const value: unknown = JSON.parse(text);
        const root =
          value === null || typeof value === "boolean" ? "literal" : Array.isArray(value) ? "array" : typeof value;
        expect(verdict).toEqual({ valid: true, root });
        expect(jsonSyntaxOf(utf8(text))).toEqual(verdict);
      }),
      { numRuns: 500 },
    );
  });

  // Mutations of valid JSON reach the edges (a dropped quote, a stray comma) far more often than random text.
  const mutated = fc
    .tuple(
      fc.json(),
      fc.array(
        fc.tuple(
          fc.nat(),
          fc.nat({ max: 3 }),
          fc.constantFrom(...'{}[]",:.-+eE0123456789 \\tnulfas\u0000\u00e9\ud800\u2028/'),
        ),
        { maxLength: 4 },
      ),
    )
    .map(([text, edits]) => {
      let out = text;
      for (const [at, how, char] of edits) {
        const i = out.length === 0 ? 0 : at % out.length;
        out =
          how === 0
            ? out.slice(0, i) + out.slice(i + 1)
            : how === 1
              ? out.slice(0, i) + char + out.slice(i)
              : out.slice(0, i) + char + out.slice(i + 1);
      }
      return out;
    });

  it("agrees with JSON.parse on mutated and random text", () => {
    fc.assert(
      fc.property(fc.oneof(mutated, fc.string({ unit: fc.constantFrom(...'{}[]",:.-+eE0123 \ttrue') })), (text) => {
        expect(jsonTextSyntaxOf(text).valid).toBe(parses(text));
      }),
      { numRuns: 3000 },
    );
  });

  it("agrees with JSON.parse of the UTF-8 on mutated bytes", () => {
    const bytes = fc
      .tuple(fc.json(), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }))
      .map(([text, edits]) => {
        const out = utf8(text);
        for (const [at, byte] of edits) out[at % out.length] = byte;
        return out;
      });
    fc.assert(
      fc.property(bytes, (input) => {
        expect(jsonSyntaxOf(input).valid).toBe(parsesBytes(input));
      }),
      { numRuns: 3000 },
    );
  });

  it("gives the same verdict however the bytes are split", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.json().map(utf8), mutated.map(utf8)),
        fc.array(fc.nat(), { maxLength: 5 }),
        (input, cuts) => {
          const check = new JsonSyntaxCheck(true);
          let from = 0;
          for (const cut of [...cuts.map((c) => c % (input.length + 1))].sort((a, b) => a - b)) {
            check.push(input.subarray(from, cut));
            from = cut;
          }
          expect(check.push(input.subarray(from)).end()).toEqual(jsonSyntaxOf(input));
        },
      ),
      { numRuns: 1000 },
    );
  });
});
