/**
 * Whether bytes or text are one JSON text (RFC 8259), decided without building it: a state machine over
 * bytes, fed in pieces (`push`), holding the nesting (one byte a level, up to `JSON_MAX_DEPTH`) and a few
 * counters. `JSON.parse` of a 6 MiB body can allocate ~112 MiB on V8, near an isolate's 128 MB limit.
 * Why by hand, and how its verdict matches `JSON.parse`'s: docs/run-proxy.md#design-notes.
 */

/**
 * The deepest nesting of arrays and objects accepted. Deeper than the parsers apps use take (Python's
 * `json` stops near 1,000 levels, serde_json at 128), and a bound on what a check holds.
 */
export const JSON_MAX_DEPTH = 1000;

/** What a JSON text holds at its top level. */
export type JsonRoot = "object" | "array" | "string" | "number" | "literal";

export type JsonSyntax = { valid: true; root: JsonRoot } | { valid: false; reason: string; offset: number };

const enum S {
  Value, // a value must come
  ArrayFirst, // after `[`: a value or `]`
  ObjectFirst, // after `{`: a key or `}`
  Key, // after `,` in an object: a key
  Colon,
  AfterValue,
  String,
  Escape,
  Hex,
  Utf8,
  Minus,
  Zero,
  Int,
  FracStart,
  Frac,
  ExpStart,
  ExpSign,
  Exp,
  Literal,
  End,
}

const ARRAY = 0;
const OBJECT = 1;
const LITERALS = ["true", "false", "null"].map((word) => Uint8Array.from(word, (c) => c.charCodeAt(0)));

const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isDigit = (b: number) => b >= 0x30 && b <= 0x39;
const isHex = (b: number) => isDigit(b) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46);

/** A JSON text checked piece by piece: `push` each piece of its bytes in order, then `end`. */
export class JsonSyntaxCheck {
  private state = S.Value;
  /** Whether each open level is an array or an object: grown as the text goes deeper, up to `JSON_MAX_DEPTH`. */
  private nesting = new Uint8Array(16);
  private depth = 0;
  private root: JsonRoot | null = null;
  private inKey = false;
  /** Hex digits of a `\u` escape, or bytes of a literal, still to come. */
  private count = 0;
  private literal: Uint8Array = LITERALS[0]!;
  /** The range the next byte of a UTF-8 sequence must fall in (Unicode 15, table 3-7). */
  private low = 0x80;
  private high = 0xbf;
  private offset = 0;
  private failure: { reason: string; offset: number } | null = null;

  /** `byteOrderMark`: a UTF-8 byte order mark at the start of the first piece is passed over (RFC 8259 §8.1 lets a parser ignore it). */
  constructor(private readonly byteOrderMark = false) {}

  push(bytes: Uint8Array): this {
    if (this.failure !== null) return this;
    let state = this.state;
    const n = bytes.length;
    let i = 0;
    if (
      this.byteOrderMark &&
      this.offset === 0 &&
      n >= 3 &&
      bytes[0] === 0xef &&
      bytes[1] === 0xbb &&
      bytes[2] === 0xbf
    )
      i = 3;
    for (; i < n; i++) {
      let b = bytes[i]!;
      switch (state) {
        case S.String:
          // The common case, plain text, in a tight loop.
          while (b >= 0x20 && b < 0x80 && b !== 0x22 && b !== 0x5c && ++i < n) b = bytes[i]!;
          if (i === n) break;
          if (b === 0x22) state = this.inKey ? S.Colon : S.AfterValue;
          else if (b === 0x5c) state = S.Escape;
          else if (b < 0x20) return this.fail("a control character in a string", i);
          else if (b >= 0xc2 && b <= 0xdf) state = this.sequence(1, 0x80, 0xbf);
          else if (b === 0xe0) state = this.sequence(2, 0xa0, 0xbf);
          else if (b === 0xed) state = this.sequence(2, 0x80, 0x9f);
          else if (b >= 0xe1 && b <= 0xef) state = this.sequence(2, 0x80, 0xbf);
          else if (b === 0xf0) state = this.sequence(3, 0x90, 0xbf);
          else if (b >= 0xf1 && b <= 0xf3) state = this.sequence(3, 0x80, 0xbf);
          else if (b === 0xf4) state = this.sequence(3, 0x80, 0x8f);
          else return this.fail("a byte that is not UTF-8", i);
          break;
        case S.Utf8:
          if (b < this.low || b > this.high) return this.fail("a byte that is not UTF-8", i);
          this.low = 0x80;
          this.high = 0xbf;
          if (--this.count === 0) state = S.String;
          break;
        case S.Escape:
          if (b === 0x75) {
            this.count = 4;
            state = S.Hex;
          } else if (
            b === 0x22 ||
            b === 0x5c ||
            b === 0x2f ||
            b === 0x62 ||
            b === 0x66 ||
            b === 0x6e ||
            b === 0x72 ||
            b === 0x74
          )
            state = S.String;
          else return this.fail("an unknown escape in a string", i);
          break;
        case S.Hex:
          if (!isHex(b)) return this.fail("a \\u escape without four hex digits", i);
          if (--this.count === 0) state = S.String;
          break;
        case S.Literal:
          if (b !== this.literal[this.literal.length - this.count]) return this.fail("an unknown word", i);
          if (--this.count === 0) state = S.AfterValue;
          break;
        case S.Minus:
          if (b === 0x30) state = S.Zero;
          else if (isDigit(b)) state = S.Int;
          else return this.fail("a number without digits", i);
          break;
        case S.Int:
        case S.Zero:
          if (state === S.Int && isDigit(b)) break;
          if (b === 0x2e) state = S.FracStart;
          else if (b === 0x65 || b === 0x45) state = S.ExpStart;
          else if (isDigit(b)) return this.fail("a number with a leading zero", i);
          else {
            i--; // read again as what follows the number
            state = S.AfterValue;
          }
          break;
        case S.FracStart:
          if (!isDigit(b)) return this.fail("a number without digits after its point", i);
          state = S.Frac;
          break;
        case S.Frac:
          if (b === 0x65 || b === 0x45) state = S.ExpStart;
          else if (!isDigit(b)) {
            i--; // read again as what follows the number
            state = S.AfterValue;
          }
          break;
        case S.ExpStart:
          if (b === 0x2b || b === 0x2d) state = S.ExpSign;
          else if (isDigit(b)) state = S.Exp;
          else return this.fail("a number without digits in its exponent", i);
          break;
        case S.ExpSign:
          if (!isDigit(b)) return this.fail("a number without digits in its exponent", i);
          state = S.Exp;
          break;
        case S.Exp:
          if (!isDigit(b)) {
            i--; // read again as what follows the number
            state = S.AfterValue;
          }
          break;
        default: {
          if (isSpace(b)) break;
          if (state === S.End) return this.fail("more after the end of the text", i);
          if (state === S.AfterValue) {
            if (this.depth === 0) {
              state = S.End;
              i--;
              break;
            }
            const open = this.nesting[this.depth - 1];
            if (b === 0x2c) state = open === OBJECT ? S.Key : S.Value;
            else if (b === (open === OBJECT ? 0x7d : 0x5d)) this.depth--;
            else
              return this.fail(
                open === OBJECT
                  ? "an object without `,` or `}` after a value"
                  : "an array without `,` or `]` after a value",
                i,
              );
            break;
          }
          if (state === S.Colon) {
            if (b !== 0x3a) return this.fail("a key without `:`", i);
            state = S.Value;
            break;
          }
          if (state === S.ObjectFirst || state === S.Key) {
            if (b === 0x22) {
              this.inKey = true;
              state = S.String;
            } else if (b === 0x7d && state === S.ObjectFirst) {
              this.depth--;
              state = S.AfterValue;
            } else return this.fail("an object whose key is not a string", i);
            break;
          }
          if (state === S.ArrayFirst && b === 0x5d) {
            this.depth--;
            state = S.AfterValue;
            break;
          }
          // A value.
          const kind = this.valueAt(b);
          if (kind === null) return this.fail("a value that is not JSON", i);
          if (this.root === null) this.root = kind;
          if (kind === "object" || kind === "array") {
            if (this.depth === JSON_MAX_DEPTH) return this.fail(`nesting deeper than ${JSON_MAX_DEPTH} levels`, i);
            if (this.depth === this.nesting.length) this.deepen();
            this.nesting[this.depth++] = kind === "object" ? OBJECT : ARRAY;
            state = kind === "object" ? S.ObjectFirst : S.ArrayFirst;
          } else if (kind === "string") {
            this.inKey = false;
            state = S.String;
          } else if (kind === "number") {
            state = b === 0x2d ? S.Minus : b === 0x30 ? S.Zero : S.Int;
          } else {
            this.literal = LITERALS[b === 0x74 ? 0 : b === 0x66 ? 1 : 2]!;
            this.count = this.literal.length - 1;
            state = S.Literal;
          }
        }
      }
    }
    this.state = state;
    this.offset += n;
    return this;
  }

  /** The verdict on everything pushed. */
  end(): JsonSyntax {
    if (this.failure !== null) return { valid: false, ...this.failure };
    const done =
      this.state === S.End ||
      (this.depth === 0 &&
        (this.state === S.AfterValue ||
          this.state === S.Zero ||
          this.state === S.Int ||
          this.state === S.Frac ||
          this.state === S.Exp));
    if (!done || this.root === null)
      return {
        valid: false,
        reason: this.root === null ? "no value" : "a text that ends too soon",
        offset: this.offset,
      };
    return { valid: true, root: this.root };
  }

  /** Ends the check (`push` then takes no more) and says why, at which byte. */
  private fail(reason: string, at: number): this {
    this.failure = { reason, offset: this.offset + at };
    return this;
  }

  private deepen(): void {
    const deeper = new Uint8Array(Math.min(this.nesting.length * 4, JSON_MAX_DEPTH));
    deeper.set(this.nesting);
    this.nesting = deeper;
  }

  private sequence(count: number, low: number, high: number): S {
    this.count = count;
    this.low = low;
    this.high = high;
    return S.Utf8;
  }

  private valueAt(b: number): JsonRoot | null {
    if (b === 0x7b) return "object";
    if (b === 0x5b) return "array";
    if (b === 0x22) return "string";
    if (b === 0x2d || isDigit(b)) return "number";
    if (b === 0x74 || b === 0x66 || b === 0x6e) return "literal";
    return null;
  }
}

/** Whether `bytes` are one JSON text in UTF-8 (a leading byte order mark allowed). */
export const jsonSyntaxOf = (bytes: Uint8Array): JsonSyntax => new JsonSyntaxCheck(true).push(bytes).end();

// Text is checked as UTF-8 in slices through one buffer: a UTF-16 unit takes at most 3 bytes. A
// surrogate pair cut by a slice becomes two U+FFFD, which changes no verdict: inside a string any
// character is allowed (`JSON.parse` takes lone surrogates too), outside one neither is.
const SLICE_UNITS = 16 * 1024;
const encoder = new TextEncoder();
// One buffer for every check: a check runs start to end without yielding, so none shares it.
let buffer: Uint8Array | null = null;

/** Whether `text` is one JSON text: `JSON.parse`'s verdict (with the depth bound), without its object graph. */
export function jsonTextSyntaxOf(text: string): JsonSyntax {
  const check = new JsonSyntaxCheck();
  buffer ??= new Uint8Array(SLICE_UNITS * 3);
  if (text.length <= SLICE_UNITS) return check.push(buffer.subarray(0, encoder.encodeInto(text, buffer).written)).end();
  for (let at = 0; at < text.length; at += SLICE_UNITS) {
    const { written } = encoder.encodeInto(text.slice(at, at + SLICE_UNITS), buffer);
    check.push(buffer.subarray(0, written));
  }
  return check.end();
}
