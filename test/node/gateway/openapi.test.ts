import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { productionDeps } from "../../../src/deps";
import { createHttpRouter } from "../../../src/http";
import { TEST_SECRETS } from "../../secrets";

// The document needs no storage: a binding-less env with valid settings is enough to serve it.
const env = {
  ...TEST_SECRETS,
  SERVICE_DOMAIN: "service.test",
  API_HOSTNAMES: "localhost",
  REGIONS: "us-east-1",
  DNS_RESOLVER_URL: "http://127.0.0.1:8053/dns-query",
  CERTIFICATE_PROVIDER: "local",
} as unknown as Env;

describe("OpenAPI document", () => {
  it("validates against the OpenAPI 3.1 schema", async () => {
    const response = await createHttpRouter(productionDeps).request("/v2/openapi.json", {}, env);
    expect(response.status).toBe(200);
    const document = (await response.json()) as Record<string, unknown>;
    const validator = new Validator();
    const result = await validator.validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });
});

describe("OpenAPI document: successes", () => {
  it("gives every operation a 2XX answer, but HEAD on a run path, which is always refused", async () => {
    const response = await createHttpRouter(productionDeps).request("/v2/openapi.json", {}, env);
    const document = (await response.json()) as {
      paths: Record<string, Record<string, { operationId: string; responses: Record<string, unknown> }>>;
    };
    const without: string[] = [];
    for (const item of Object.values(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (!Object.keys(operation.responses).some((status) => /^2(\d\d|XX)$/.test(status)))
          without.push(`${method} ${operation.operationId}`);
      }
    }
    expect(without.sort()).toEqual(["head headAsyncRun", "head runAppHead"]);
  });
});

describe("OpenAPI document, linted by Redocly", () => {
  it("passes @redocly/cli lint with the recommended rules: no error, no warning", async () => {
    const response = await createHttpRouter(productionDeps).request("/v2/openapi.json", {}, env);
    const dir = mkdtempSync(join(tmpdir(), "eg-openapi-"));
    try {
      const file = join(dir, "openapi.json");
      writeFileSync(file, await response.text());
      // No config file: Redocly's built-in `recommended` ruleset. Offline: no telemetry, no update check.
      // But `operation-2xx-response`: a run path's HEAD is documented, and it has no success (checked below).
      const lint = await new Promise<{ code: number | null; output: string }>((resolve) =>
        execFile(
          process.execPath,
          [
            join("node_modules", "@redocly", "cli", "bin", "cli.js"),
            "lint",
            "--extends=recommended",
            "--skip-rule=operation-2xx-response",
            "--format=stylish",
            file,
          ],
          {
            env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" },
            timeout: 60_000,
          },
          (error, stdout, stderr) =>
            resolve({
              code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
              output: `${stdout}${stderr}`,
            }),
        ),
      );
      expect(lint.output).toMatch(/Woohoo! Your API description is valid/);
      expect(lint.output).not.toMatch(/warning/i);
      expect(lint.code, lint.output).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("OpenAPI document: runs that outlive their caller", () => {
  it("describes Prefer, Cancel-After, Preference-Applied, the 202 body and the status URL's event stream", async () => {
    const response = await createHttpRouter(productionDeps).request("/v2/openapi.json", {}, env);
    type Operation = {
      operationId: string;
      parameters?: { in: string; name: string }[];
      responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, { schema: unknown }> }>;
    };
    const document = (await response.json()) as {
      paths: Record<string, Record<string, Operation>>;
      components: { schemas: Record<string, { properties: Record<string, unknown> }> };
    };
    const operations = Object.values(document.paths).flatMap((item) => Object.values(item));
    const operation = (id: string) => operations.find((op) => op.operationId === id)!;
    const run = operation("runApp");
    const headers = (run.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name.toLowerCase());
    expect(headers).toEqual(expect.arrayContaining(["prefer", "cancel-after"]));
    expect(run.responses["200"]!.headers).toHaveProperty("Preference-Applied");
    const accepted = run.responses["202"]!;
    expect(accepted.headers).toHaveProperty("Preference-Applied");
    expect(accepted.headers).toHaveProperty("Location");
    expect(accepted.content!["application/json"]!.schema).toEqual({ $ref: "#/components/schemas/AsyncRunAccepted" });
    expect(Object.keys(document.components.schemas.AsyncRunAccepted!.properties)).toEqual(
      expect.arrayContaining(["run_id", "status", "status_url", "urls"]),
    );
    // The status URL (`GET` of an async or handed-over run) answers a stream of events when asked.
    const status = operations.find((op) => op.operationId === "getAsyncRun")!;
    expect(Object.keys(status.responses["200"]!.content!)).toContain("text/event-stream");
    expect((status.parameters ?? []).map((p) => p.name.toLowerCase())).toEqual(
      expect.arrayContaining(["accept", "last-event-id"]),
    );
  });
});
