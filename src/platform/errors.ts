import type { ContentfulStatusCode } from "hono/utils/http-status";

/**
 * The closed set of problem codes the gateway answers with. Clients switch on `code`
 * (also the last segment of the problem `type` URI); `title` is the same for every
 * occurrence of a code, `detail` says what happened this time.
 */
export const PROBLEMS = {
  bad_request: { status: 400, title: "Bad request" },
  validation_failed: { status: 400, title: "Validation failed" },
  malformed_json: { status: 400, title: "Malformed JSON" },
  unauthorized: { status: 401, title: "Authentication required" },
  invalid_token: { status: 401, title: "Invalid credentials" },
  forbidden: { status: 403, title: "Forbidden" },
  insufficient_scope: { status: 403, title: "Insufficient scope" },
  not_found: { status: 404, title: "Not found" },
  unknown_host: { status: 404, title: "Unknown host" },
  method_not_allowed: { status: 405, title: "Method not allowed" },
  request_timeout: { status: 408, title: "Request body timed out" },
  conflict: { status: 409, title: "Conflict" },
  last_owner: { status: 409, title: "A project needs an owner" },
  build_not_cancellable: { status: 409, title: "Build is not cancellable" },
  build_cancelled: { status: 409, title: "Build was cancelled" },
  invalid_transition: { status: 409, title: "Invalid build status transition" },
  no_deployment: { status: 409, title: "App has no ready deployment" },
  gone: { status: 410, title: "Gone" },
  run_not_cancellable: { status: 409, title: "Run is not cancellable" },
  payload_too_large: { status: 413, title: "Payload too large" },
  unsupported_media_type: { status: 415, title: "Unsupported media type" },
  idempotency_key_reused: { status: 422, title: "Idempotency key reused" },
  window_past_retention: { status: 422, title: "Window past retention" },
  rate_limited: { status: 429, title: "Too many requests" },
  internal_error: { status: 500, title: "Internal error" },
  configuration_error: { status: 500, title: "Service misconfigured" },
  bad_gateway: { status: 502, title: "Upstream failed" },
  run_interrupted: { status: 502, title: "Run interrupted" },
  service_unavailable: { status: 503, title: "Service unavailable" },
  gateway_timeout: { status: 504, title: "Upstream timed out" },
  run_deadline: { status: 504, title: "Run deadline passed" },
} as const satisfies Record<string, { status: ContentfulStatusCode; title: string }>;

export type ProblemCode = keyof typeof PROBLEMS;

/** One bad input field: where it was (`body`, `query`, `path`, `header`), which field, and why. */
export interface FieldError {
  location: string;
  field: string;
  message: string;
}

/**
 * The members every problem body has: RFC 9457's own and ours. An extension may not take one of these
 * names (a run's state named `status` once replaced the integer HTTP status, which clients and
 * generated SDKs read); the types refuse it, and so does `ApiError` at run time.
 */
export const PROBLEM_MEMBERS = [
  "type",
  "title",
  "status",
  "detail",
  "instance",
  "code",
  "request_id",
  "errors",
] as const;
type ProblemMember = (typeof PROBLEM_MEMBERS)[number];

/** Extension members of a problem body (RFC 9457 section 3.2), e.g. `run_id`: any name but a problem member's. */
export type ProblemExtensions = Record<string, unknown> & { [member in ProblemMember]?: never };

export interface ApiErrorOptions {
  errors?: FieldError[];
  /** Extension members added to the problem body (RFC 9457 section 3.2), e.g. `run_id`. */
  extensions?: ProblemExtensions;
  headers?: Record<string, string>;
  cause?: unknown;
}

/** The one error type handlers throw; `onError` renders it as RFC 9457 problem+json. */
export class ApiError extends Error {
  readonly code: ProblemCode;
  readonly status: ContentfulStatusCode;
  readonly errors: FieldError[] | undefined;
  readonly extensions: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: ProblemCode, detail: string, options: ApiErrorOptions = {}) {
    super(detail, { cause: options.cause });
    this.name = "ApiError";
    this.code = code;
    this.status = PROBLEMS[code].status;
    this.errors = options.errors;
    const shadowing = Object.keys(options.extensions ?? {}).filter((name) =>
      (PROBLEM_MEMBERS as readonly string[]).includes(name),
    );
    if (shadowing.length > 0)
      throw new TypeError(`A problem extension may not replace the problem member(s) ${shadowing.join(", ")}.`);
    this.extensions = options.extensions;
    this.headers = options.headers;
  }
}

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/**
 * The URI that names a problem type. A URN, so it is absolute and the same on every host and
 * installation (clients compare it); every code is described on the reference page, `/v2/docs`.
 */
export function problemType(code: ProblemCode): string {
  return `urn:edge-gateway:problem:${code}`;
}

export function problemBody(error: ApiError, requestId: string) {
  return {
    type: problemType(error.code),
    title: PROBLEMS[error.code].title,
    status: error.status,
    detail: error.message,
    code: error.code,
    request_id: requestId,
    ...(error.errors ? { errors: error.errors } : {}),
    ...error.extensions,
  };
}

export function problemResponse(error: ApiError, requestId: string): Response {
  const headers = new Headers(error.headers);
  headers.set("Content-Type", PROBLEM_CONTENT_TYPE);
  headers.set("X-Request-Id", requestId);
  headers.set("Cache-Control", "no-store");
  return new Response(JSON.stringify(problemBody(error, requestId)), { status: error.status, headers });
}

export const notFound = (what: string, id: string) => new ApiError("not_found", `No ${what} with id '${id}'.`);

/**
 * A 400 `validation_failed` listing each bad field; `detail` defaults to the one field and why (a
 * caller reading only `detail`, as curl shows it, learns which header or field to fix), or to a count.
 */
export function invalidFields(errors: FieldError[], detail?: string): ApiError {
  const locations = [...new Set(errors.map((e) => e.location))];
  const where = locations.length === 1 ? `The ${locations[0]}` : "The request";
  const one = errors.length === 1 ? errors[0]! : null;
  const fallback = one
    ? `The ${one.location} field '${one.field}' is invalid: ${one.message.replace(/\.$/, "")}.`
    : `${where} has ${errors.length} invalid field(s).`;
  return new ApiError("validation_failed", detail ?? fallback, { errors });
}

/** `invalidFields` for one field. */
export const invalidField = (location: string, field: string, message: string, detail?: string) =>
  invalidFields([{ location, field, message }], detail);
