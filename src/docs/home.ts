import type { Context } from "hono";
import { DASHBOARD_BASE } from "../dashboard";
import type { AppEnv } from "../platform/scope";

/**
 * `/` on an API hostname: people who type the bare hostname land on the dashboard; API clients get the
 * same redirect plus `Link` to the reference (RFC 8631 `service-doc`) and the OpenAPI document
 * (`service-desc`), and the body links both for anything that does not follow redirects.
 */
export function home(c: Context<AppEnv>) {
  const body = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Edge Gateway</title></head>
<body><p>The dashboard is at <a href="${DASHBOARD_BASE}">${DASHBOARD_BASE}</a>; the API reference at <a href="/v2/docs">/v2/docs</a> (OpenAPI: <a href="/v2/openapi.json">/v2/openapi.json</a>).</p></body></html>
`;
  return c.body(body, 302, {
    Location: DASHBOARD_BASE,
    Link: '</v2/docs>; rel="service-doc", </v2/openapi.json>; rel="service-desc"',
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-store",
  });
}
