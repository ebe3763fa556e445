import { describe, expect, it } from "vitest";
import { client, testDeps } from "../../test/helpers";
import { createHttpRouter } from "../http";

const api = client();

interface Operation {
  operationId?: string;
  responses: Record<string, unknown>;
  security?: unknown;
  servers?: { url: string }[];
  parameters?: { name: string; in: string }[];
}
interface Doc {
  openapi: string;
  info: { version: string; description: string; license?: { name: string; identifier?: string } };
  servers: { url: string }[];
  paths: Record<string, { servers?: { url: string }[] } & Record<string, Operation>>;
}

const METHODS = new Set(["get", "put", "post", "delete", "patch", "head", "options", "trace"]);
/** Every operation of the document as `METHOD /full/path`, its own server (else its path item's, else the document's) in front. */
const operationsOf = (doc: Doc) =>
  Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.has(method))
      .map(([method, op]) => ({
        key: `${method.toUpperCase()} ${((op as Operation).servers ?? item.servers ?? doc.servers)[0]!.url}${path}`,
        op: op as Operation,
      })),
  );

describe("OpenAPI document and reference page", () => {
  it("serves OpenAPI 3.1 with info.version 1.0.0, without credentials", async () => {
    const { status, body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    expect(status).toBe(200);
    expect(body.openapi).toBe("3.1.0");
    expect(body.info.version).toBe("1.0.0");
  });

  it("lists every route the management API and the run endpoint serve, and nothing they do not", async () => {
    const { body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    const keys = operationsOf(body).map(({ key }) => key.replace(/\{(\w+)\}/g, ":$1"));
    // A run (any method on `{path}`, HEAD refused) is served by runs/run.ts, not the router; HEAD on an
    // async run is refused through its GET route.
    const RUN_PATH = "/v4/:project_id/:app_name/:path";
    expect(keys.filter((key) => key.endsWith(` ${RUN_PATH}`)).sort()).toEqual(
      ["DELETE", "GET", "HEAD", "PATCH", "POST", "PUT"].map((m) => `${m} ${RUN_PATH}`),
    );
    expect(keys).toContain("HEAD /v4/:project_id/:app_name/runs/:run_id");
    const documented = keys.filter((key) => !key.startsWith("HEAD ") && !key.endsWith(` ${RUN_PATH}`)).sort();
    const served = createHttpRouter(testDeps())
      .routes.filter((r) => r.method !== "ALL" && (r.path.startsWith("/v2/projects") || r.path.startsWith("/v4/")))
      // Hono's pattern of a parameter (`:path{.+}`: the rest of the path) is the router's, not the document's.
      .map((r) => `${r.method} ${r.path.replace(/\{[^}]*\}/g, "")}`);
    expect(documented).toEqual([...new Set(served)].sort());
    expect(documented).toContain("DELETE /v2/projects/:project_id/apps/:app_id/builds/:build_id");
    expect(documented).toContain("GET /v4/:project_id/:app_name/runs/:run_id");
  });

  it("names every operation (unique operationIds, for generated SDKs) and states a licence", async () => {
    const { body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    const ids = operationsOf(body).map(({ key, op }) => op.operationId ?? `missing on ${key}`);
    expect(ids.filter((id) => !/^[a-z][A-Za-z]+$/.test(id))).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    expect(body.info.license).toEqual({ name: "Proprietary", identifier: "LicenseRef-Proprietary" });
    expect(body.info.description).toContain("/v4/{project_id}/{app_name}/{path}");
  });

  it("documents a problem response for every error status a route declares", async () => {
    const { body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    const cancel = body.paths["/projects/{project_id}/apps/{app_id}/builds/{build_id}"]!.delete!;
    expect(Object.keys(cancel.responses).sort()).toEqual(["200", "400", "401", "403", "404", "409"]);
    expect(cancel.security).toEqual([{ bearerAuth: ["builds:write"] }]);
  });

  it("documents the run proxy's operations under /v4, async runs included, each needing runs:invoke", async () => {
    const { body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    const run = body.paths["/{project_id}/{app_name}/{path}"]!;
    const runs = body.paths["/{project_id}/{app_name}/runs/{run_id}"]!;
    for (const op of [run.post!, run.get!, run.put!, run.patch!, run.delete!, runs.get!, runs.delete!]) {
      expect(op.servers).toEqual([{ url: "/v4" }]);
      expect(op.security).toEqual([{ bearerAuth: ["runs:invoke"] }]);
    }
    expect(Object.keys(run.post!.responses)).toEqual(expect.arrayContaining(["200", "202", "422"]));
    expect(run.post!.parameters!.map((p) => p.name)).toEqual(
      expect.arrayContaining(["async", "webhookEndpoint", "idempotency-key"]),
    );
    expect(Object.keys(runs.delete!.responses).sort()).toEqual([
      "200",
      "401",
      "403",
      "404",
      "409",
      "429",
      "500",
      "503",
    ]);
    // The router serves the async run's two operations under /v4; every run is runs/run.ts's.
    const served = createHttpRouter(testDeps())
      .routes.filter((r) => r.path.startsWith("/v4/"))
      .map((r) => `${r.method} ${r.path}`);
    expect(new Set(served)).toEqual(
      new Set(["GET /v4/:project_id/:app_name/runs/:run_id", "DELETE /v4/:project_id/:app_name/runs/:run_id"]),
    );
  });

  it("documents a run's body and the app's own answers: JSON for cortex, any type for custom, event streams and binary passed through", async () => {
    const { body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    type Media = Record<string, { schema: { $ref?: string; anyOf?: { $ref?: string }[] } }>;
    const run = operationsOf(body).find(({ op }) => op.operationId === "runApp")!.op as Operation & {
      requestBody?: { required: boolean; content: Media };
    };
    // Not required (a run may have no body), and described for both runtimes rather than validated here.
    expect(run.requestBody?.required).toBe(false);
    expect(Object.keys(run.requestBody!.content)).toEqual(["application/json", "*/*"]);
    const ok = run.responses["200"] as { headers: Record<string, unknown>; content: Media };
    expect(Object.keys(ok.content)).toEqual(["application/json", "text/event-stream", "*/*"]);
    expect(ok.content["application/json"]!.schema.anyOf![0]!.$ref).toBe("#/components/schemas/RunResult");
    expect(ok.headers).toHaveProperty("X-Run-Id");
  });

  it("renders the reference page with no script and nothing from another origin", async () => {
    const response = await api.call("/v2/docs", { token: null });
    const html = await response.text();
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    expect(response.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(html.startsWith("<!DOCTYPE html>")).toBe(true);
    expect(html).toContain("Cancel a build");
    // Markdown code spans are code, never raw backticks; the run endpoint has its own server, /v4.
    expect(html).not.toContain("`");
    expect(html).toContain("<code>Authorization: Bearer &lt;token&gt;</code>");
    expect(html).toContain("<code>/v4/{project_id}/{app_name}/{path}</code>");
    expect(html).toContain("build_not_cancellable");
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/(src|href)="https?:/i);
  });
});

describe("/ on an API hostname", () => {
  it("sends people to the dashboard and links the API reference", async () => {
    const response = await api.call("/", { token: null });
    expect(response.status).toBe(302);
    expect(response.headers.get("location")).toBe("/dashboard");
    expect(response.headers.get("link")).toBe('</v2/docs>; rel="service-doc", </v2/openapi.json>; rel="service-desc"');
    const html = await response.text();
    expect(html.startsWith("<!DOCTYPE html>")).toBe(true);
    expect(html).toContain('href="/v2/docs"');
  });
});
