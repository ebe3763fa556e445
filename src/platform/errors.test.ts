import { env } from "cloudflare:workers";
import { createExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { client, seedProject, testDeps } from "../../test/helpers";
import { createWorker } from "../worker";
import { ApiError, PROBLEM_MEMBERS, problemBody, type ProblemExtensions } from "./errors";
import { installErrorHandling } from "./not-found";
import { createRouter } from "./router";
import { routerWayIn } from "./request";

const api = client();

function expectProblem(
  response: { status: number; body: Record<string, unknown>; headers: Headers },
  status: number,
  code: string,
) {
  expect(response.status).toBe(status);
  expect(response.headers.get("content-type")).toBe("application/problem+json");
  expect(response.body).toMatchObject({ status, code, type: `urn:edge-gateway:problem:${code}` });
  expect(typeof response.body.title).toBe("string");
  expect(typeof response.body.detail).toBe("string");
  expect(response.body.request_id).toBe(response.headers.get("x-request-id"));
  expect(JSON.stringify(response.body)).not.toMatch(/at .*\.(ts|js):\d+/);
}

describe("problem+json on every error path", () => {
  it("gives every response an X-Request-Id, success or not", async () => {
    const ok = await api.json("/v2/projects");
    expect(ok.headers.get("x-request-id")).toMatch(/^req_[0-9a-z]{30}$/);
    const missing = await api.json("/nowhere");
    expect(missing.headers.get("x-request-id")).toMatch(/^req_/);
    expect(ok.headers.get("x-request-id")).not.toBe(missing.headers.get("x-request-id"));
  });

  it("answers malformed JSON with 400 malformed_json", async () => {
    const response = await api.json("/v2/projects", {
      method: "POST",
      rawBody: '{"name": ',
      headers: { "Content-Type": "application/json" },
    });
    expectProblem(response, 400, "malformed_json");
  });

  it("answers a non-JSON body with 415", async () => {
    const response = await api.json("/v2/projects", {
      method: "POST",
      rawBody: "name=x",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    expectProblem(response, 415, "unsupported_media_type");
  });

  it("answers unknown fields with 400 naming each one", async () => {
    const response = await api.json("/v2/projects", { method: "POST", body: { name: "x", colour: "red", size: 3 } });
    expectProblem(response, 400, "validation_failed");
    expect(response.body.errors).toEqual(
      expect.arrayContaining([
        { location: "body", field: "colour", message: "is not a known field" },
        { location: "body", field: "size", message: "is not a known field" },
      ]),
    );
  });

  it("answers a missing body with 400 naming the required fields", async () => {
    const response = await api.json("/v2/projects", { method: "POST" });
    expectProblem(response, 400, "validation_failed");
    expect(response.body.errors).toEqual([expect.objectContaining({ location: "body", field: "name" })]);
  });

  it("takes a POST with Content-Length: 0 and no Content-Type as a request without a body", async () => {
    const seed = await seedProject(api);
    const response = await api.json(`/v2/projects/${seed.projectId}/apps/${seed.appId}/builds`, {
      method: "POST",
      token: seed.token,
      rawBody: "",
      headers: { "Content-Length": "0" },
    });
    expect(response.status).toBe(201);
  });

  it("answers a body over the 64 KiB limit with 413, declared or streamed", async () => {
    const big = JSON.stringify({ name: "x".repeat(70 * 1024) });
    const declared = await api.json("/v2/projects", {
      method: "POST",
      rawBody: big,
      headers: { "Content-Type": "application/json" },
    });
    expectProblem(declared, 413, "payload_too_large");
    const stream = new Blob([big]).stream();
    const streamed = await api.json("/v2/projects", {
      method: "POST",
      rawBody: stream,
      headers: { "Content-Type": "application/json" },
    });
    expectProblem(streamed, 413, "payload_too_large");
  });

  it("answers a wrong method with 405 and an Allow header", async () => {
    const seed = await seedProject(api);
    const response = await api.json(`/v2/projects/${seed.projectId}/apps/${seed.appId}`, {
      method: "DELETE",
      token: seed.token,
    });
    expectProblem(response, 405, "method_not_allowed");
    expect(response.headers.get("allow")).toBe("GET, HEAD");
    const builds = await api.json(`/v2/projects/${seed.projectId}/apps/${seed.appId}/builds`, {
      method: "PUT",
      token: seed.token,
    });
    expect(builds.headers.get("allow")).toBe("GET, HEAD, POST");
  });

  it("answers an unknown route with 404 not_found", async () => {
    expectProblem(await api.json("/v2/nothing-here"), 404, "not_found");
    // `/` itself redirects to the dashboard (src/docs/home.ts); any other unknown path is a 404 problem.
    expectProblem(await api.json("/nothing-here"), 404, "not_found");
  });

  it("answers an invalid query parameter with 400 naming it", async () => {
    const response = await api.json("/v2/projects?limit=1000");
    expectProblem(response, 400, "validation_failed");
    expect(response.body.errors).toEqual([expect.objectContaining({ location: "query", field: "limit" })]);
    const cursor = await api.json("/v2/projects?cursor=not-a-cursor");
    expectProblem(cursor, 400, "validation_failed");
  });

  it("answers an unexpected exception with a 500 problem that hides the error and logs it with the request id", async () => {
    const app = createRouter();
    app.use(routerWayIn(testDeps()));
    app.get("/boom", () => {
      throw new Error("secret internal detail");
    });
    installErrorHandling(app);
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const response = await app.fetch(new Request("http://localhost/boom"), env, createExecutionContext());
    const body = await response.json<Record<string, unknown>>();
    expect(response.status).toBe(500);
    expect(body.code).toBe("internal_error");
    expect(JSON.stringify(body)).not.toContain("secret internal detail");
    expect(log).toHaveBeenCalledWith(
      expect.objectContaining({ message: "unhandled error", request_id: body.request_id }),
    );
    log.mockRestore();
  });

  it("names missing or malformed settings at the first request, without their values", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const broken = { ...env, ADMIN_TOKEN: undefined, REGIONS: "Mars", SERVICE_DOMAIN: "service.test" };
    const response = await createWorker(testDeps()).fetch(
      new Request("http://localhost/v2/projects"),
      broken as unknown as Env,
      createExecutionContext(),
    );
    const body = await response.json<Record<string, unknown>>();
    expect(response.status).toBe(500);
    expect(body.code).toBe("configuration_error");
    expect(body.detail).toContain("ADMIN_TOKEN is not set");
    expect(body.detail).toContain("REGIONS");
    expect(body.detail).not.toContain(env.JWT_SECRET);
    log.mockRestore();
  });

  it("answers an unknown host with 404 unknown_host", async () => {
    const response = await api.json("/v2/projects", { host: "somewhere.example.org" });
    expectProblem(response, 404, "unknown_host");
  });
});

describe("problem extensions never replace a problem member", () => {
  it("refuses an extension named like a member of RFC 9457 or ours, and renders the others beside them", () => {
    for (const member of PROBLEM_MEMBERS) {
      const extensions = { run_id: "run_1", [member]: "queued" } as ProblemExtensions;
      expect(() => new ApiError("run_not_cancellable", "The run is running.", { extensions }), member).toThrow(
        TypeError,
      );
    }
    // @ts-expect-error: the types refuse it before the run time does.
    expect(() => new ApiError("conflict", "x", { extensions: { status: "running" } })).toThrow(/status/);
    const body = problemBody(
      new ApiError("run_not_cancellable", "The run is running.", {
        extensions: { run_id: "run_1", run_status: "running" },
      }),
      "req_1",
    );
    expect(body).toMatchObject({ status: 409, code: "run_not_cancellable", run_id: "run_1", run_status: "running" });
  });
});
