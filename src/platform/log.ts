/**
 * The service's one way to write a log line. Each line is one object (Workers Logs extracts and indexes
 * the top-level fields of a logged object, so `request_id`, `project_id`, `status` … are searchable).
 *
 * Nothing a caller sent is logged as it came: an error is described by its name, code and a redacted
 * message (`describeError`), never `String(error)`, because a driver's error message can carry the
 * statement's parameters (forwarded headers, query strings, webhook URLs, secrets).
 */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** The fields every line may carry; anything else is the line's own detail. */
export interface LogFields {
  request_id?: string;
  project_id?: string;
  /** The route pattern or the run path's stage for requests; `queue` or `cron` for other invocations. */
  route?: string;
  queue?: string;
  cron?: string;
  status?: number;
  duration_ms?: number;
  /** Described by `describeError` before it is written. */
  error?: unknown;
  [field: string]: unknown;
}

const WRITERS: Record<LogLevel, (line: unknown) => void> = {
  debug: (line) => console.log(line),
  info: (line) => console.log(line),
  warn: (line) => console.warn(line),
  error: (line) => console.error(line),
};

/** Writes one structured line. */
export function log(level: LogLevel, message: string, fields: LogFields = {}): void {
  const { error, ...rest } = fields;
  const line: Record<string, unknown> = { level, message, ...rest };
  if (error !== undefined) line.error = describeError(error);
  WRITERS[level](line);
}

export interface ErrorDescription {
  name: string;
  code?: string;
  message: string;
}

/** Longest message kept; past it the text is cut (and a redacted message rarely needs more). */
const MAX_MESSAGE = 300;

/**
 * An error as a log may show it: name, code (when the error has one) and its message with whatever could
 * be a caller's data removed: quoted strings, parameter lists, URLs' queries, bearer tokens, long runs of
 * hex or base64. What remains says what failed (`D1_ERROR: UNIQUE constraint failed: …`), not with what.
 */
export function describeError(error: unknown): ErrorDescription {
  if (!(error instanceof Error)) return { name: typeof error, message: redact(String(error)) };
  const code = (error as { code?: unknown }).code;
  const cause = error.cause instanceof Error ? ` (cause: ${error.cause.name}: ${error.cause.message})` : "";
  return {
    name: error.name,
    ...(typeof code === "string" || typeof code === "number" ? { code: String(code) } : {}),
    message: redact(`${error.message}${cause}`),
  };
}

/** Removes what may be a caller's data from an error message. */
export function redact(text: string): string {
  const out = text
    // drizzle: "Failed query: <sql>\nparams: a,b,c" — the parameters go, the statement stays.
    .replace(/\bparams:[\s\S]*$/i, "params: [redacted]")
    .replace(/\b(bearer|basic)\s+\S+/gi, "$1 [redacted]")
    .replace(/(https?:\/\/[^\s?#"']*)[?#][^\s"']*/gi, "$1?[redacted]")
    .replace(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g, "'[redacted]'")
    .replace(/\b[A-Za-z0-9_-]*[0-9][A-Za-z0-9_-]*[A-Za-z][A-Za-z0-9_-]{20,}\b|\b[A-Za-z0-9+/=_-]{32,}\b/g, "[redacted]");
  return out.length > MAX_MESSAGE ? `${out.slice(0, MAX_MESSAGE)}…` : out;
}
