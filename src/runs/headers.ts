/**
 * The header policy of a run, both ways, in one place: what of the caller's request reaches the app
 * (`appRequestHeaders`) and what of the app's answer reaches the caller (`passedBackHeaders`). Both are
 * deny-lists: an app is an HTTP server of the customer's (an OpenAI-compatible API, its own headers)
 * and must stay byte-compatible through the gateway, so everything passes but what is listed here and
 * why. docs/run-proxy.md and SECURITY.md state the same lists.
 */

/** Header names listed in a `Connection` header: hop-by-hop for this connection only (RFC 9110 §7.6.1). */
function namedByConnection(connection: string | null): ReadonlySet<string> {
  if (connection === null) return NONE;
  return new Set(connection.split(",").map((name) => name.trim().toLowerCase()));
}
const NONE: ReadonlySet<string> = new Set();

// Never forwarded: the caller's credentials and the webhook secret stay with us; hop-by-hop headers and
// the length are the fetch's own; `Accept-Encoding` is the runtime's (it decodes only what it asked
// for); and the caller's own claims of where the request came from, which the gateway states itself
// (below) or not at all: an app that trusts an address or host the caller wrote is fooled.
const NOT_FORWARDED = new Set([
  "authorization",
  "cookie",
  "host",
  "x-webhook-secret",
  // The run's deadline is the gateway's to keep (runs/preferences.ts); `Prefer` reaches the app as sent.
  "cancel-after",
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "content-length",
  "accept-encoding",
  "forwarded",
  "x-real-ip",
  "true-client-ip",
  "x-client-ip",
  "x-cluster-client-ip",
]);

/** `https` and `host[:port]` of an absolute URL (a request's, always absolute), without parsing it whole. */
function protoAndHost(url: string): [string, string] {
  const colon = url.indexOf(":");
  const start = colon + 3;
  const end = url.indexOf("/", start);
  return [url.slice(0, colon), url.slice(start, end === -1 ? undefined : end)];
}

/**
 * The headers the app receives: the caller's, but for those above, any the caller's `Connection` names,
 * `CF-*` and `X-Forwarded-*`; then the gateway's own `X-Forwarded-For` (the caller's address as
 * Cloudflare saw it, `CF-Connecting-IP`; absent where there is none, as in local development),
 * `X-Forwarded-Proto` and `X-Forwarded-Host` (of the URL the caller called: the service's hostname or
 * the project's custom domain), and `X-Run-Id`. `keepUpgrade`: a WebSocket run keeps `Upgrade`.
 */
export function appRequestHeaders(request: Request, runId: string, keepUpgrade = false): Headers {
  const incoming = request.headers;
  const named = namedByConnection(incoming.get("connection"));
  const headers = new Headers();
  for (const [name, value] of incoming) {
    if (keepUpgrade && name === "upgrade") headers.set(name, value);
    else if (NOT_FORWARDED.has(name) || named.has(name) || name.startsWith("cf-") || name.startsWith("x-forwarded-"))
      continue;
    else headers.set(name, value);
  }
  const address = incoming.get("cf-connecting-ip");
  if (address !== null) headers.set("X-Forwarded-For", address);
  const [proto, host] = protoAndHost(request.url);
  headers.set("X-Forwarded-Proto", proto);
  headers.set("X-Forwarded-Host", host);
  headers.set("X-Run-Id", runId);
  return headers;
}

// Never passed back from the app: hop-by-hop headers; the encoding and length of a body the runtime has
// decoded; our own request id; and headers that act on the hostname as a whole rather than on this
// answer. The service's hostname is shared by every project and serves the dashboard, so an app must
// not set cookies on it (the gateway forwards no `Cookie` either, on any hostname), pin or upgrade its
// transport (HSTS, Alt-Svc, Expect-CT), wipe its storage (Clear-Site-Data), collect its browsers'
// reports (NEL, Report-To), widen a service worker's scope, ask browsers for client hints for the whole
// origin (Accept-CH), redirect a page that renders it (Refresh), or steer a CDN's cache of it.
const NOT_PASSED_BACK = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "content-encoding",
  "content-length",
  "x-request-id",
  "set-cookie",
  "set-cookie2",
  "strict-transport-security",
  "alt-svc",
  "expect-ct",
  "public-key-pins",
  "public-key-pins-report-only",
  "clear-site-data",
  "nel",
  "report-to",
  "reporting-endpoints",
  "service-worker-allowed",
  "accept-ch",
  "critical-ch",
  "refresh",
  "cdn-cache-control",
  "cloudflare-cdn-cache-control",
  "surrogate-control",
  "timing-allow-origin",
  // The gateway's own, set below.
  "x-content-type-options",
]);

/**
 * The app's `Cache-Control` made private: a run answers an authenticated request, and `public`,
 * `s-maxage` or `must-revalidate` would let a shared cache keep it and serve it to callers without the
 * key (RFC 9111 §3.5). Other directives (`max-age`, `no-cache`, `no-store`…) stay as the app wrote them.
 */
function privateCacheControl(value: string): string {
  const kept = value
    .split(",")
    .map((directive) => directive.trim())
    .filter(
      (directive) => directive !== "" && !/^(public|must-revalidate|proxy-revalidate|s-maxage\s*=.*)$/i.test(directive),
    );
  if (!kept.some((directive) => /^(private|no-store)\b/i.test(directive))) kept.unshift("private");
  return kept.join(", ");
}

/**
 * The headers of an app's answer that a passed-through answer carries: the app's, but for those above,
 * any its `Connection` names and CORS's `Access-Control-*` (a run is authorised by a key, never by the
 * caller's origin: the gateway grants no browser origin a read of another's answer); its
 * `Cache-Control` made private; then `X-Content-Type-Options: nosniff`, `Content-Security-Policy:
 * sandbox` (a document rendered from an answer is an origin of its own, never the dashboard's; the
 * app's own policy still applies, and can only restrict further) and `X-Run-Id`.
 */
export function passedBackHeaders(appHeaders: Headers, runId: string): Headers {
  const named = namedByConnection(appHeaders.get("connection"));
  const headers = new Headers();
  for (const [name, value] of appHeaders) {
    if (NOT_PASSED_BACK.has(name) || named.has(name) || name.startsWith("access-control-")) continue;
    headers.append(name, name === "cache-control" ? privateCacheControl(value) : value);
  }
  headers.set("X-Content-Type-Options", "nosniff");
  headers.append("Content-Security-Policy", "sandbox");
  headers.set("X-Run-Id", runId);
  return headers;
}
