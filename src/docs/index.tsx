import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../platform/context";
import { PROBLEMS } from "../platform/errors";
import { createRouter } from "../platform/factory";
import { runGet, runPost } from "../runs/routes";
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

/** The run endpoint is served under /v4, so its path item carries that server (OpenAPI 3.1 allows one per path). */
function runPaths() {
  const runs = createRouter();
  runs.openAPIRegistry.registerPath(runPost);
  runs.openAPIRegistry.registerPath(runGet);
  const document = runs.getOpenAPI31Document({ openapi: "3.1.0", info: OPENAPI_INFO });
  const paths = Object.fromEntries(Object.entries(document.paths ?? {}).map(([path, item]) => [path, { servers: [{ url: "/v4" }], ...item }]));
  return { paths, schemas: document.components?.schemas ?? {} };
}

const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** `GET /v2/openapi.json` (OpenAPI 3.1) and `GET /v2/docs`, a reference page rendered from it with no script and no CDN. */
export function registerDocs(v2: OpenAPIHono<AppEnv>) {
  v2.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "A service account token (`egsa_…`) or the admin token.",
  });
  const document = () => {
    const management = v2.getOpenAPI31Document({ openapi: "3.1.0", info: OPENAPI_INFO, servers: [{ url: "/v2" }] });
    const runs = runPaths();
    return {
      ...management,
      paths: { ...management.paths, ...runs.paths },
      components: { ...management.components, schemas: { ...management.components?.schemas, ...runs.schemas } },
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
