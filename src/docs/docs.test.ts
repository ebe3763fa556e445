import { describe, expect, it } from "vitest";
import { client, testDeps } from "../../test/helpers";
import { createHttpRouter } from "../http";

const api = client();

interface Operation {
  responses: Record<string, unknown>;
  security?: unknown;
  servers?: { url: string }[];
  parameters?: { name: string; in: string }[];
}
interface Doc {
  openapi: string;
  info: { version: string };
  paths: Record<string, Record<string, Operation>>;
}

describe("OpenAPI document and reference page", () => {
  it("serves OpenAPI 3.1 with info.version 1.0.0, without credentials", async () => {
    const { status, body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    expect(status).toBe(200);
    expect(body.openapi).toBe("3.1.0");
    expect(body.info.version).toBe("1.0.0");
  });

  it("lists every route the management API serves, and nothing it does not", async () => {
    const { body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    const documented = Object.entries(body.paths)
      .flatMap(([path, methods]) =>
        Object.entries(methods).map(([m, op]) => `${m.toUpperCase()} ${op.servers?.[0]?.url ?? "/v2"}${path.replace(/\{(\w+)\}/g, ":$1")}`),
      )
      .filter((route) => route.includes(" /v2/"))
      .sort();
    const served = createHttpRouter(testDeps())
      .routes
      .filter((r) => r.method !== "ALL" && r.path.startsWith("/v2/projects"))
      .map((r) => `${r.method} ${r.path}`);
    expect(documented).toEqual([...new Set(served)].sort());
    expect(documented).toContain("DELETE /v2/projects/:project_id/apps/:app_id/builds/:build_id");
  });

  it("documents a problem response for every error status a route declares", async () => {
    const { body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    const cancel = body.paths["/projects/{project_id}/apps/{app_id}/builds/{build_id}"]!.delete!;
    expect(Object.keys(cancel.responses).sort()).toEqual(["200", "400", "401", "404", "409"]);
    expect(cancel.security).toEqual([{ bearerAuth: [] }]);
  });

  it("documents the run proxy's operations under /v4, async runs included, each needing runs:invoke", async () => {
    const { body } = await api.json<Doc>("/v2/openapi.json", { token: null });
    const run = body.paths["/{project_id}/{app_name}/run"]!;
    const runs = body.paths["/{project_id}/{app_name}/runs/{run_id}"]!;
    for (const op of [run.post!, run.get!, runs.get!, runs.delete!]) {
      expect(op.servers).toEqual([{ url: "/v4" }]);
      expect(op.security).toEqual([{ bearerAuth: ["runs:invoke"] }]);
    }
    expect(Object.keys(run.post!.responses)).toEqual(expect.arrayContaining(["200", "202", "422"]));
    expect(run.post!.parameters!.map((p) => p.name)).toEqual(expect.arrayContaining(["async", "webhookEndpoint", "idempotency-key"]));
    expect(Object.keys(runs.delete!.responses).sort()).toEqual(["200", "401", "404", "409"]);
    // Every /v4 operation the router serves is documented.
    const served = createHttpRouter(testDeps()).routes.filter((r) => r.path.startsWith("/v4/")).map((r) => `${r.method} ${r.path}`);
    expect(new Set(served)).toEqual(
      new Set(["POST /v4/:project_id/:app_name/run", "GET /v4/:project_id/:app_name/run", "GET /v4/:project_id/:app_name/runs/:run_id", "DELETE /v4/:project_id/:app_name/runs/:run_id"]),
    );
  });

  it("renders the reference page with no script and nothing from another origin", async () => {
    const response = await api.call("/v2/docs", { token: null });
    const html = await response.text();
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    expect(response.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(html).toContain("Cancel a build");
    expect(html).toContain("build_not_cancellable");
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/(src|href)="https?:/i);
  });
});
