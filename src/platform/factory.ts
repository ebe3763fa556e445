import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ZodError } from "zod";
import type { AppEnv } from "./context";
import { ApiError, type FieldError, problemResponse } from "./errors";
import { newId } from "./ids";

const LOCATIONS: Record<string, string> = { json: "body", param: "path", query: "query", header: "header", cookie: "cookie" };

export function fieldErrors(error: ZodError, location: string): FieldError[] {
  return error.issues.flatMap((issue) => {
    const field = issue.path.map(String).join(".");
    if (issue.code === "unrecognized_keys") {
      return issue.keys.map((key) => ({
        location,
        field: field ? `${field}.${key}` : key,
        message: "is not a known field",
      }));
    }
    return [{ location, field: field || "(root)", message: issue.message }];
  });
}

/**
 * Every router of the service is made here, so validation failures look the same everywhere.
 * A path parameter that cannot be an id of ours names nothing: that is a 404, like an unknown id.
 */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result, c) => {
      if (result.success) return;
      if (result.target === "param") {
        const [name, value] = Object.entries(c.req.param() as Record<string, string>).find(([key]) =>
          result.error.issues.some((issue) => issue.path[0] === key),
        ) ?? ["resource", ""];
        throw new ApiError("not_found", `No ${name.replace(/_id$/, "").replace(/_/g, " ")} with id '${value}'.`);
      }
      const location = LOCATIONS[result.target] ?? result.target;
      const errors = fieldErrors(result.error, location);
      throw new ApiError("validation_failed", `The ${location} has ${errors.length} invalid field(s).`, { errors });
    },
  });
}

export const requestIdOf = (c: Context<AppEnv>) => c.get("requestId") ?? newId("req");

/**
 * Whether `err` (or what it wraps: drizzle puts the driver's error in `cause`) is D1 being unavailable:
 * overloaded, reset, a lost connection. Such a request changed nothing (each write is one statement or
 * one batch) and may simply be sent again. A constraint violation is a bug, not an outage.
 */
export function isStorageUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (/^D1[_ ]|\bD1 DB\b|Network connection lost|SQLITE_BUSY/i.test(e.message) && !/constraint/i.test(e.message)) return true;
  }
  return false;
}

/** Where an error happened: the request it answers. */
export interface RequestFacts {
  requestId: string;
  method: string;
  path: string;
}

/** Renders whatever was thrown as problem+json; an unexpected error is logged with its request id, never shown. */
export function renderError(err: unknown, c: Context<AppEnv>): Response {
  return problemFor(err, { requestId: requestIdOf(c), method: c.req.method, path: c.req.path });
}

/** `renderError` for code that runs without the router (the run fast path). */
export function problemFor(err: unknown, { requestId, method, path }: RequestFacts): Response {
  if (err instanceof ApiError) return problemResponse(err, requestId);
  if (isStorageUnavailable(err)) {
    console.error(JSON.stringify({ level: "error", msg: "storage unavailable", request_id: requestId, method, path, error: String(err) }));
    return problemResponse(
      new ApiError("service_unavailable", "The database is unavailable for a moment; nothing was changed. Retry the request.", { headers: { "Retry-After": "1" } }),
      requestId,
    );
  }
  if (err instanceof HTTPException) {
    if (err.status === 400 && /malformed json/i.test(err.message)) {
      return problemResponse(new ApiError("malformed_json", "The request body is not valid JSON."), requestId);
    }
    if (err.status === 413) {
      return problemResponse(new ApiError("payload_too_large", "The request body is too large."), requestId);
    }
    if (err.status === 401) return problemResponse(new ApiError("unauthorized", err.message), requestId);
    if (err.status < 500) return problemResponse(new ApiError("bad_request", err.message || "Bad request."), requestId);
  }
  console.error(
    JSON.stringify({
      level: "error",
      msg: "unhandled error",
      request_id: requestId,
      method,
      path,
      error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      stack: err instanceof Error ? err.stack : undefined,
    }),
  );
  return problemResponse(
    new ApiError("internal_error", "An unexpected error occurred. Quote the request_id when reporting it."),
    requestId,
  );
}

function routePattern(path: string): RegExp {
  const source = path
    .split("/")
    .map((segment) => {
      if (segment === "*") return ".*";
      if (segment.startsWith(":")) return "[^/]+";
      return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    })
    .join("/");
  return new RegExp(`^${source}/?$`);
}

/** The methods some route of `app` answers for `path`: the `Allow` header of a 405. */
export function allowedMethods(app: OpenAPIHono<AppEnv>, path: string): string[] {
  const methods = new Set<string>();
  for (const route of app.routes) {
    if (route.method === "ALL" || !routePattern(route.path).test(path)) continue;
    methods.add(route.method);
    if (route.method === "GET") methods.add("HEAD");
  }
  return [...methods].sort();
}

/** Installs the error handler and the 404/405 answer on the top-level app. */
export function installErrorHandling(app: OpenAPIHono<AppEnv>) {
  app.onError(renderError);
  app.notFound((c) => {
    const allow = allowedMethods(app, c.req.path);
    if (allow.length > 0) {
      const detail = `${c.req.method} is not allowed on ${c.req.path}; use ${allow.join(", ")}.`;
      return renderError(new ApiError("method_not_allowed", detail, { headers: { Allow: allow.join(", ") } }), c);
    }
    return renderError(new ApiError("not_found", `No route for ${c.req.method} ${c.req.path}.`), c);
  });
}
