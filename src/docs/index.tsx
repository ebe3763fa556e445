import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../platform/scope";
import { PROBLEMS } from "../platform/errors";
import { ReferencePage, type OpenApiDocument } from "./reference";

export const OPENAPI_INFO = {
  title: "Edge Gateway API",
  version: "1.0.0",
  description:
    "The whole API of the gateway: the management API under `/v2` (projects, service accounts, apps, builds, " +
    "custom domains and webhook deliveries) and the run endpoint `/v4/{project_id}/{app_name}/run`, which runs " +
    "an app's current deployment and can deliver the answer to a signed webhook. Authenticate with " +
    "`Authorization: Bearer <token>`: a service account token of the project, or the operator's admin token " +
    "(runs also take an HS256 JWT). Errors are RFC 9457 problem+json with a stable `code` and the " +
    "`request_id` also sent as `X-Request-Id`. Lists take `limit` and `cursor` and answer `{data, next_cursor}`.",
  // No open-source licence is granted; SPDX's LicenseRef- form names a licence of one's own.
  license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
};

/**
 * Operations served outside /v2 (the run endpoint, under /v4), from their own router's registry; each
 * path item carries its server, as OpenAPI 3.1 allows, so one document describes the whole API.
 */
function pathsServedAt(server: string, router: OpenAPIHono<AppEnv>) {
  const document = router.getOpenAPI31Document({ openapi: "3.1.0", info: OPENAPI_INFO });
  const paths = Object.fromEntries(Object.entries(document.paths ?? {}).map(([path, item]) => [path, { servers: [{ url: server }], ...item }]));
  return { paths, schemas: document.components?.schemas ?? {} };
}

const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * `GET /v2/openapi.json` (OpenAPI 3.1) and `GET /v2/docs`, a reference page rendered from it with no
 * script and no CDN. `elsewhere` maps a base path (`/v4`) to the router of the operations served there.
 */
export function registerDocs(v2: OpenAPIHono<AppEnv>, elsewhere: Record<string, OpenAPIHono<AppEnv>> = {}) {
  v2.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "A service account token (`egsa_…`) or the admin token.",
  });
  const document = () => {
    const management = v2.getOpenAPI31Document({ openapi: "3.1.0", info: OPENAPI_INFO, servers: [{ url: "/v2" }] });
    const others = Object.entries(elsewhere).map(([server, router]) => pathsServedAt(server, router));
    return {
      ...management,
      paths: Object.assign({ ...management.paths }, ...others.map((o) => o.paths)),
      components: { ...management.components, schemas: Object.assign({ ...management.components?.schemas }, ...others.map((o) => o.schemas)) },
    } as unknown as OpenApiDocument;
  };

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
