import type { OpenAPIHono, RouteConfig } from "@hono/zod-openapi";
import type { AppEnv } from "../platform/scope";
import { PROBLEMS } from "../platform/errors";
import { ReferencePage, type OpenApiDocument } from "./reference";

export const OPENAPI_INFO = {
  title: "Edge Gateway API",
  version: "1.0.0",
  description:
    "The whole API of the gateway: the management API under `/v2` (projects, service accounts, apps, builds, " +
    "custom domains and webhook deliveries) and the run endpoint `/v4/{project_id}/{app_name}/{path}`, which runs " +
    "an app's current deployment at `{path}` (a `cortex` function such as `run`, or any route of a `custom` server: " +
    "the OpenAI SDK works with `baseURL` `/v4/{project_id}/{app_name}/v1`), streams the app's own answer back or wraps a " +
    "function's JSON in the run envelope, runs it asynchronously on request, and can send the answer to a signed webhook. " +
    "Authenticate with `Authorization: Bearer <token>`: a service account token of the project, or the " +
    "operator's admin token (runs also take an HS256 JWT). Errors are RFC 9457 problem+json with a stable " +
    "`code` and the `request_id` also sent as `X-Request-Id`. Lists take `limit` and `cursor` and answer " +
    "`{data, next_cursor}`.",
  // No open-source licence is granted; SPDX's LicenseRef- form names a licence of one's own.
  license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
};

const CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * `GET /v2/openapi.json` (OpenAPI 3.1) and `GET /v2/docs`, a reference page rendered from it with no
 * script and no CDN. `runRoutes`, the run proxy's operations, are documented under their own server, `/v4`.
 */
export function registerDocs(v2: OpenAPIHono<AppEnv>, runRoutes: readonly RouteConfig[] = []) {
  v2.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description:
      "A service account token (`egsa_…`) or the admin token. An operation lists the scope a service account token needs for it; without it the answer is 403 `insufficient_scope`.",
  });
  for (const route of runRoutes) v2.openAPIRegistry.registerPath({ ...route, servers: [{ url: "/v4" }] });
  const document = () =>
    v2.getOpenAPI31Document({
      openapi: "3.1.0",
      info: OPENAPI_INFO,
      servers: [{ url: "/v2" }],
    }) as unknown as OpenApiDocument;

  v2.get("/openapi.json", (c) => {
    c.header("Cache-Control", "public, max-age=300");
    return c.json(document());
  });
  v2.get("/docs", (c) => {
    c.header("Content-Security-Policy", CSP);
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Referrer-Policy", "no-referrer");
    return c.html(<ReferencePage doc={document()} problems={PROBLEMS} />);
  });
}
