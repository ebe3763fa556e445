import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { world } from "../../test/cron-world";
import { addDomain, uniqueLabel, validate } from "../../test/domains";
import { seedProject } from "../../test/helpers";
import { HOST_CACHE_TTL_MS } from "../domains/lookup";

/** A project with a validated custom domain (and an app named hello), plus a second project. */
async function setup() {
  const w = world();
  const seed = await seedProject(w.api);
  const other = await seedProject(w.api);
  const host = `${uniqueLabel("routed")}.example.test`;
  w.dns.set(host, "ok");
  await addDomain(w.api, seed, host);
  expect((await validate(w.api, seed, host)).body.status).toBe("validated");
  const on = (path: string, options: { method?: string; token?: string | null; host?: string } = {}) =>
    w.api.json(path, { token: seed.token, host, ...options });
  return { w, seed, other, host, on };
}

// The run route is not part of this branch: a request the gate lets through reaches the router's own
// 404 ("No route for …"), which tells it apart from the gate's answers.
const passedGate = (body: Record<string, unknown>) => body.code === "not_found" && String(body.detail).startsWith("No route for");

describe("host routing: a validated custom domain", () => {
  it("passes the run path of its own project, for every app, for GET and POST, with or without a trailing slash", async () => {
    const { seed, on } = await setup();
    for (const [method, path] of [["GET", "hello/run"], ["POST", "hello/run"], ["GET", "hello/run/"], ["POST", "any-other-app/run"]] as const) {
      const { status, body } = await on(`/v4/${seed.projectId}/${path}`, { method });
      expect(status).toBe(404);
      expect(passedGate(body)).toBe(true);
    }
  });

  it("answers 404 for another project's id, without saying whether it exists", async () => {
    const { other, on } = await setup();
    const { status, body } = await on(`/v4/${other.projectId}/hello/run`, { token: other.token });
    expect(status).toBe(404);
    expect(body).toMatchObject({ code: "not_found" });
    expect(passedGate(body)).toBe(false);
    expect((await on(`/v4/proj_nonexistent/hello/run`)).body.detail).toBe(String(body.detail).replace(other.projectId, "proj_nonexistent"));
  });

  it.each(["/v2/projects", "/v2/docs", "/v2/openapi.json", "/", "/v4/PROJECT/hello", "/v4/PROJECT/hello/run/extra", "/v4/PROJECT/a/b/run"])(
    "serves nothing else of the surface: %s",
    async (path) => {
      const { seed, on, host } = await setup();
      const { status, body } = await on(path.replace("PROJECT", seed.projectId));
      expect(status).toBe(404);
      expect(body).toMatchObject({ code: "not_found", detail: `${host} serves only /v4/{project_id}/{app_name}/run of its own project.` });
    },
  );

  it.each(["/.well-known/acme-challenge/abc", "/.well-known/pki-validation/fileauth.txt", "/.well-known/acme-challenge/"])(
    "never passes %s to an app",
    async (path) => {
      const { on } = await setup();
      const { status, body } = await on(path, { token: null });
      expect(status).toBe(404);
      expect(String(body.detail)).toContain("No certificate validation token");
    },
  );

  it("matches the Host header case-insensitively, with a port or a trailing dot", async () => {
    const { seed, on, host } = await setup();
    for (const variant of [host.toUpperCase(), `${host}:8443`, `${host}.`]) {
      expect(passedGate((await on(`/v4/${seed.projectId}/hello/run`, { host: variant })).body)).toBe(true);
    }
  });
});

describe("host routing: hosts that are not served", () => {
  it("answers pending and failed domains with a clear 404 problem", async () => {
    const { w, seed } = await setup();
    const pending = `${uniqueLabel("pending")}.example.test`;
    const failed = `${uniqueLabel("failed")}.example.test`;
    await addDomain(w.api, seed, pending);
    w.dns.set(failed, "wrong");
    await addDomain(w.api, seed, failed);
    await validate(w.api, seed, failed);
    for (const [host, status] of [[pending, "pending"], [failed, "failed"]]) {
      const { body } = await w.api.json(`/v4/${seed.projectId}/hello/run`, { token: seed.token, host });
      expect(body).toMatchObject({ status: 404, code: "unknown_host" });
      expect(body.detail).toContain(`not validated yet (status ${status})`);
    }
  });

  it("answers unknown hosts with unknown_host", async () => {
    const { w } = await setup();
    const { status, body } = await w.api.json("/v2/projects", { host: "nobody.example.net" });
    expect(status).toBe(404);
    expect(body).toMatchObject({ code: "unknown_host", detail: "'nobody.example.net' is not served by this gateway." });
  });

  it("stops serving a deleted domain at once in this isolate", async () => {
    const { seed, on, host, w } = await setup();
    expect(passedGate((await on(`/v4/${seed.projectId}/hello/run`)).body)).toBe(true);
    await w.api.json(`/v2/projects/${seed.projectId}/domains/${host}`, { method: "DELETE", token: seed.token });
    expect((await on(`/v4/${seed.projectId}/hello/run`)).body.code).toBe("unknown_host");
  });

  it("serves a domain as soon as it is validated, even after its host was cached as pending", async () => {
    const { w, seed } = await setup();
    const host = `${uniqueLabel("late")}.example.test`;
    await addDomain(w.api, seed, host);
    expect((await w.api.json(`/v4/${seed.projectId}/hello/run`, { token: seed.token, host })).body.code).toBe("unknown_host");
    w.dns.set(host, "ok");
    await validate(w.api, seed, host);
    expect(passedGate((await w.api.json(`/v4/${seed.projectId}/hello/run`, { token: seed.token, host })).body)).toBe(true);
  });
});

describe("host routing: the hot path", () => {
  it("makes no D1 query for a warm host: the isolate cache answers until its TTL", async () => {
    const { seed, on, host, w } = await setup();
    expect(passedGate((await on(`/v4/${seed.projectId}/hello/run`)).body)).toBe(true);
    // Remove the row behind the cache's back: only a D1 lookup could notice.
    await env.DB.prepare("DELETE FROM domains WHERE hostname = ?").bind(host).run();
    expect(passedGate((await on(`/v4/${seed.projectId}/hello/run`)).body)).toBe(true);
    w.api.clock.advance(HOST_CACHE_TTL_MS);
    expect((await on(`/v4/${seed.projectId}/hello/run`)).body.code).toBe("unknown_host");
  });
});
