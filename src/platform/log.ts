import { AsyncLocalStorage } from "node:async_hooks";

/**
 * The service's one way to write a log line. Each line is one object (Workers Logs extracts and indexes
 * the top-level fields of a logged object, so `request_id`, `project_id`, `status` … are searchable).
 *
 * Nothing a caller sent is logged as it came: an error is described by its name, code and a redacted
 * message (`describeError`), never `String(error)`, because a driver's error message can carry the
 * statement's parameters (forwarded headers, query strings, webhook URLs, secrets). Nor is a request's
 * URL query, a header or a body ever a field.
 *
 * Every line written while an invocation runs carries that invocation's fields (`request_id`, and the
 * `route`, `queue` or `cron` it serves, the `project_id` when known): each entry point opens them with
 * `withInvocation`, so a line deep in a handler needs no scope passed down to say which request it is.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** The fields every line may carry; anything else is the line's own detail. */
export interface LogFields {
  request_id?: string;
  project_id?: string;
  /** The route pattern of a request (`/v2/projects/:project_id/apps`). */
  route?: string;
  /** The queue of a batch, or the cron expression of a scheduled invocation. */
  queue?: string;
  cron?: string;
  /** A request's HTTP status. */
  status?: number;
  /** How long the request (until its answer's headers), batch or cron invocation took. */
  duration_ms?: number;
  /** Described by `describeError` before it is written. */
  error?: unknown;
  [field: string]: unknown;
}

/** What an invocation's lines share. */
export interface InvocationFields {
  request_id: string;
  project_id?: string;
  /** A run's id, once the run is accepted (`annotateInvocation`). */
  run_id?: string;
  app_name?: string;
  route?: string;
  queue?: string;
  cron?: string;
}

const invocation = new AsyncLocalStorage<InvocationFields>();

/** Runs `work` with `fields` on every line it (and whatever it leaves in `waitUntil`) writes. */
export const withInvocation = <T>(fields: InvocationFields, work: () => T): T => invocation.run(fields, work);

/**
 * Adds ids learnt during an invocation (a run's id once it is accepted, its app once known) to every
 * line it writes from then on. Ids only: nothing a caller sent as data (no path, query, header or body).
 */
export function annotateInvocation(fields: { run_id?: string; app_name?: string }): void {
  const store = invocation.getStore();
  if (store) Object.assign(store, fields);
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
  const line: Record<string, unknown> = { level, message, ...invocation.getStore(), ...rest };
  if (error !== undefined) line.error = described.has(error as object) ? error : describeError(error);
  WRITERS[level](line);
}

/** An `error` line: errors by name, code and redacted message (`describeError`), never their values. */
export const logError = (message: string, fields: LogFields = {}): void => log("error", message, fields);

/** The one line of an HTTP request: `error` for a 5xx answer, else `info`. */
export function logRequest(fields: {
  request_id: string;
  method: string;
  route: string;
  status: number;
  duration_ms: number;
  project_id?: string;
  [field: string]: unknown;
}) {
  log(fields.status >= 500 ? "error" : "info", "request", fields);
}

/**
 * The one line of a queue batch or a cron invocation, after `work`; a failure is logged (`error`) and
 * rethrown, so the platform still retries the batch or marks the invocation failed.
 */
export async function logInvocation(
  fields: InvocationFields & Record<string, unknown>,
  work: () => Promise<void>,
): Promise<void> {
  const started = Date.now();
  const message = fields.queue !== undefined ? "queue batch" : "cron";
  try {
    await withInvocation(
      {
        request_id: fields.request_id,
        ...(fields.queue !== undefined ? { queue: fields.queue } : { cron: fields.cron }),
      },
      work,
    );
  } catch (error) {
    log("error", message, { ...fields, outcome: "error", duration_ms: Date.now() - started, error });
    throw error;
  }
  log("info", message, { ...fields, outcome: "ok", duration_ms: Date.now() - started });
}

export interface ErrorDescription {
  name: string;
  code?: string;
  message: string;
  /** Stack frames only (`at …` lines): the first line of a stack repeats the message, unredacted. */
  stack?: string;
}

/** What `describeError` made: written as they are, not described again. */
const described = new WeakSet<object>();

/** Longest message kept; past it the text is cut (and a redacted message rarely needs more). */
const MAX_MESSAGE = 300;

/**
 * An error as a log may show it: name, code (when the error has one) and its message with whatever could
 * be a caller's data removed: quoted strings, parameter lists, URLs' paths and queries, bearer tokens, long runs of
 * hex or base64. What remains says what failed (`D1_ERROR: UNIQUE constraint failed: …`), not with what.
 * `withStack` adds the stack's frames (for an error nobody expected), never its message line.
 */
export function describeError(error: unknown, { withStack = false }: { withStack?: boolean } = {}): ErrorDescription {
  if (!(error instanceof Error)) {
    const description = { name: typeof error, message: redact(String(error)) };
    described.add(description);
    return description;
  }
  const code = (error as { code?: unknown }).code;
  // Each redacted alone: drizzle's parameter list ends its message, and would take the cause with it.
  const cause = error.cause instanceof Error ? ` (cause: ${error.cause.name}: ${redact(error.cause.message)})` : "";
  const frames = withStack ? (error.stack ?? "").split("\n").filter((line) => /^\s+at /.test(line)) : [];
  const description: ErrorDescription = {
    name: error.name,
    ...(typeof code === "string" || typeof code === "number" ? { code: String(code) } : {}),
    message: `${redact(error.message)}${cause}`,
    ...(frames.length > 0 ? { stack: frames.slice(0, 12).join("\n") } : {}),
  };
  described.add(description);
  return description;
}

/** Removes what may be a caller's data from an error message. */
export function redact(text: string): string {
  const out = text
    // drizzle: "Failed query: <sql>\nparams: a,b,c" — the parameters go, the statement stays.
    .replace(/\bparams:[\s\S]*$/i, "params: [redacted]")
    .replace(/\b(bearer|basic)\s+\S+/gi, "$1 [redacted]")
    // A URL keeps its origin only: a Slack-style webhook URL is a secret in its path, others in their query.
    .replace(/(\bhttps?:\/\/[^\s/?#"']+)[/?#][^\s"']*/gi, "$1/[redacted]")
    .replace(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g, "'[redacted]'")
    .replace(
      /\b[A-Za-z0-9_-]*[0-9][A-Za-z0-9_-]*[A-Za-z][A-Za-z0-9_-]{20,}\b|\b[A-Za-z0-9+/=_-]{32,}\b/g,
      "[redacted]",
    );
  return out.length > MAX_MESSAGE ? `${out.slice(0, MAX_MESSAGE)}…` : out;
}
