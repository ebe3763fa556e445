import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { ApiError, problemResponse } from "./errors";
import { newId } from "./ids";
import { describeError, log } from "./log";
import { type AppEnv, routeOf } from "./scope";

/**
 * Whether `err` (or what it wraps: drizzle puts the driver's error in `cause`) is D1 or a Durable Object
 * (a run's keeper, which keeps async runs) being unavailable: overloaded, reset, a lost connection. The
 * platform marks a Durable Object's such errors `retryable` or `overloaded` ("Error handling", Durable
 * Objects docs). Such a request changed nothing (each write is one statement, one batch or one
 * object's call) and may simply be sent again. A constraint violation is a bug, not an outage.
 */
export function isStorageUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const object = e as { retryable?: unknown; overloaded?: unknown };
    if (object.retryable === true || object.overloaded === true) return true;
    if (/^D1[_ ]|\bD1 DB\b|Network connection lost|SQLITE_BUSY/i.test(e.message) && !/constraint/i.test(e.message))
      return true;
  }
  return false;
}

/**
 * Where an error happened: the request it answers, by its id and its route's pattern
 * (`/v4/:project_id/:app_name/:path`), never its path: a path is the caller's data (an app's route can
 * carry an email address or a reset token), and the request id finds the rest.
 */
export interface RequestFacts {
  requestId: string;
  method: string;
  route: string;
}

/** The request id of a router's request; a fresh one when the scope could not be built (a configuration error). */
export const requestIdOf = (c: Context<AppEnv>) =>
  (c.var.scope as AppEnv["Variables"]["scope"] | undefined)?.requestId ?? newId("req");

/** Renders whatever a router's handler threw as problem+json. */
export function renderError(err: unknown, c: Context<AppEnv>): Response {
  return problemFor(err, { requestId: requestIdOf(c), method: c.req.method, route: routeOf(c) });
}

/** Whatever was thrown, as problem+json; an unexpected error is logged with its request id, never shown. */
export function problemFor(err: unknown, { requestId, method, route }: RequestFacts): Response {
  if (err instanceof ApiError) return problemResponse(err, requestId);
  if (isStorageUnavailable(err)) {
    log("error", "storage unavailable", { request_id: requestId, method, route, error: err });
    return problemResponse(
      new ApiError(
        "service_unavailable",
        "The database is unavailable for a moment; nothing was changed. Retry the request.",
        { headers: { "Retry-After": "1" } },
      ),
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
  // By name, code, redacted message and stack frames: a driver's message can carry a statement's parameters.
  log("error", "unhandled error", {
    request_id: requestId,
    method,
    route,
    error: describeError(err, { withStack: true }),
  });
  return problemResponse(
    new ApiError("internal_error", "An unexpected error occurred. Quote the request_id when reporting it."),
    requestId,
  );
}
