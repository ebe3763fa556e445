import { describe, expect, it } from "vitest";
import { client, testDeps } from "../../test/helpers";
import { createHttpRouter } from "../http";

const api = client();

interface Doc {
  openapi: string;
  info: { version: string };
  paths: Record<string, Record<string, { responses: Record<string, unknown>; security?: unknown }>>;
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
      .flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} /v2${path.replace(/\{(\w+)\}/g, ":$1")}`))
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
