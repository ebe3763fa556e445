/**
 * The headers that cross the gateway between a caller and an app: which of the caller's reach the app,
 * and which of the app's answer reach the caller.
 */

// Not forwarded: the caller's credentials and the webhook secret stay with us; hop-by-hop headers and
// the length are the fetch's own; `Accept-Encoding` is the runtime's (it decodes only what it asked for).
const DROPPED = new Set([
  "authorization",
  "cookie",
  "host",
  "x-webhook-secret",
  "connection",
  "keep-alive",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "content-length",
  "accept-encoding",
]);

export function upstreamHeaders(incoming: Headers, runId: string, keepUpgrade = false): Headers {
  const headers = new Headers();
  for (const [name, value] of incoming) {
    if (DROPPED.has(name) && !(keepUpgrade && name === "upgrade")) continue;
    if (name.startsWith("cf-")) continue;
    headers.set(name, value);
  }
  headers.set("X-Run-Id", runId);
  return headers;
}

// Not passed back from the app: hop-by-hop headers; the encoding and length of a body the runtime has
// decoded; and headers that would act on the gateway's hostname as a whole (shared by every project,
// the dashboard included) rather than on this answer.
const NOT_PASSED_BACK = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "content-encoding",
  "content-length",
  "set-cookie",
  "set-cookie2",
  "strict-transport-security",
  "alt-svc",
  "clear-site-data",
  "x-request-id",
]);

/** The headers of an app's answer that a passed-through answer carries, with `X-Run-Id`. */
export function passedBackHeaders(upstream: Headers, runId: string): Headers {
  const headers = new Headers();
  for (const [name, value] of upstream) if (!NOT_PASSED_BACK.has(name)) headers.append(name, value);
  headers.set("X-Run-Id", runId);
  return headers;
}
