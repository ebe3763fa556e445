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
