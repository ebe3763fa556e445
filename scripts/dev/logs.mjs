// The gateway's own log lines, as `npm run dev` shows them: one line each. The Worker writes one object
// per line (src/platform/log.ts); the local runtime hands it over as text in the console's inspect form
// (`{ level: 'info', message: 'request', … }`, over several lines when long). Request lines are left out
// (the front prints each request once, with what the caller saw), and so is everything below `warn` (the
// gateway's routine: a queue batch or a cron that went well, a lane's alarm); a warning or an error is
// one line: level, message and its fields.

/** Lines that say nothing a person at the terminal needs: the front has the request; below a warning, all went well. */
function routine(fields, level) {
  if (fields.message === "request") return true;
  const written = typeof fields.level === "string" ? fields.level : level;
  return written !== "warn" && written !== "error";
}

/** One log message of the Worker as one line, or null when it is routine. */
export function formatLog({ level, message }) {
  const fields = parseInspected(message.trim());
  if (fields === null || typeof fields !== "object" || Array.isArray(fields))
    return `worker ${level}: ${squash(message)}`;
  if (routine(fields, level)) return null;
  const { level: written, message: what, request_id: requestId, ...rest } = fields;
  const detail = Object.entries(rest)
    .map(([key, value]) => `${key}=${typeof value === "object" && value !== null ? flat(value) : value}`)
    .join(" ");
  return [`gateway ${written ?? level}:`, what, detail, requestId].filter(Boolean).join(" ");
}

const squash = (text) => text.replace(/\s*\n\s*/g, " ").trim();
const flat = (value) =>
  Object.entries(value)
    .filter(([key]) => key !== "stack")
    .map(([key, v]) => `${key}:${typeof v === "object" && v !== null ? flat(v) : v}`)
    .join(",");

/**
 * Reads the console's inspect form of a plain value: objects, arrays, strings in ' " or ` quotes,
 * numbers, booleans, null and undefined. Anything else (a class instance, a cycle) is null: shown as it is.
 */
export function parseInspected(text) {
  let at = 0;
  const space = () => {
    while (at < text.length && /\s/.test(text[at])) at++;
  };
  const fail = () => {
    throw new SyntaxError(`unexpected ${text[at] ?? "end"} at ${at}`);
  };
  const value = () => {
    space();
    const c = text[at];
    if (c === "{") return object();
    if (c === "[") return array();
    if (c === "'" || c === '"' || c === "`") return string(c);
    const word = /^(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|true|false|null|undefined)/.exec(text.slice(at));
    if (!word) fail();
    at += word[0].length;
    return word[0] === "undefined" ? undefined : JSON.parse(word[0]);
  };
  const string = (quote) => {
    let out = "";
    for (at++; at < text.length; at++) {
      const c = text[at];
      if (c === quote) {
        at++;
        return out;
      }
      if (c === "\\") {
        const next = text[++at];
        out += { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", v: "\v", 0: "\0" }[next] ?? next;
      } else out += c;
    }
    return fail();
  };
  const key = () => {
    space();
    if (text[at] === "'" || text[at] === '"') return string(text[at]);
    const word = /^[\w$]+/.exec(text.slice(at));
    if (!word) fail();
    at += word[0].length;
    return word[0];
  };
  const object = () => {
    const out = {};
    at++;
    space();
    if (text[at] === "}") return (at++, out);
    for (;;) {
      const k = key();
      space();
      if (text[at++] !== ":") fail();
      out[k] = value();
      space();
      if (text[at] === ",") at++;
      space();
      if (text[at] === "}") return (at++, out);
    }
  };
  const array = () => {
    const out = [];
    at++;
    space();
    if (text[at] === "]") return (at++, out);
    for (;;) {
      out.push(value());
      space();
      if (text[at] === ",") at++;
      space();
      if (text[at] === "]") return (at++, out);
    }
  };
  try {
    const parsed = value();
    space();
    return at === text.length ? parsed : null;
  } catch {
    return null;
  }
}

/**
 * The environment of `wrangler d1 migrations apply` under `npm run dev` (over the process's own): plain
 * text, no prompt, and its default log level whatever the process's, since its output is read for
 * `migrationsSummary` (at `WRANGLER_LOG=warn` it prints nothing).
 */
export const MIGRATE_ENV = { CI: "true", NO_COLOR: "1", WRANGLER_LOG: "log" };

/**
 * `wrangler d1 migrations apply` in one line: "D1 migrations: applied 11 to the local database (0000_init.sql …
 * 0010_run_stream_wait.sql)", or "up to date" (wrangler itself prints its table of them twice).
 */
export function migrationsSummary(output) {
  const names = [...new Set(output.match(/\d{4}_[\w-]+\.sql/g) ?? [])];
  if (/No migrations to apply/i.test(output)) return "D1 migrations: the local database is up to date";
  if (names.length === 0) return "D1 migrations applied";
  const span = names.length > 2 ? `${names[0]} … ${names.at(-1)}` : names.join(", ");
  return `D1 migrations: applied ${names.length} to the local database (${span})`;
}
