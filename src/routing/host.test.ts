import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { world } from "../../test/cron-world";
import { addDomain, uniqueLabel, validate } from "../../test/domains";
import { seedProject } from "../../test/helpers";
import { seedRunnable } from "../../test/runs";

/** A project with a validated custom domain and a deployed app, plus a second project. */
async function setup() {
  const w = world();
  const seed = await seedRunnable(w.api);
  const other = await seedProject(w.api);
  const host = `${uniqueLabel("routed")}.example.test`;
  w.dns.set(host, "ok");
  await addDomain(w.api, seed, host);
  expect((await validate(w.api, seed, host)).body.status).toBe("validated");
  const on = (path: string, options: { method?: string; token?: string | null; host?: string; body?: unknown } = {}) =>
    w.api.json(path, { token: seed.token, host, ...options });
  return { w, seed, other, host, on };
}

// A request the gate lets through reaches the run proxy, and the deployed app answers with a run envelope.
const ran = (response: { status: number; body: Record<string, unknown> }) =>
  response.status === 200 && typeof response.body.run_id === "string";

describe("host routing: a validated custom domain", () => {
  it("runs the apps of its own project, GET and POST, with the same authentication as the default address", async () => {
    const { seed, on } = await setup();
    expect(ran(await on(seed.runPath, { method: "GET" }))).toBe(true);
    const post = await on(seed.runPath, { method: "POST", body: { inputs: { n: 1 } } });
    expect(ran(post)).toBe(true);
    expect((await on(seed.runPath, { token: null })).status).toBe(401);
    // Every app of the project is served: an app that does not exist is the run proxy's 404, not the gate's.
    const unknown = await on(`/v4/${seed.projectId}/any-other-app/run`, { method: "POST", body: {} });
    expect(unknown.body).toMatchObject({
      status: 404,
      code: "not_found",
      detail: `No app named 'any-other-app' in project '${seed.projectId}'.`,
    });
  });

  it("answers 404 for another project's id, without saying whether it exists", async () => {
    const { other, on, host } = await setup();
    const { status, body } = await on(`/v4/${other.projectId}/hello/run`, { token: other.token });
    expect(status).toBe(404);
    // The gate answers, even with the other project's own valid token.
    expect(body).toMatchObject({ code: "not_found", detail: `No project with id '${other.projectId}' on ${host}.` });
    expect((await on(`/v4/proj_nonexistent/hello/run`)).body.detail).toBe(
      String(body.detail).replace(other.projectId, "proj_nonexistent"),
    );
  });

  it.each([
    "/v2/projects",
    "/v2/docs",
    "/v2/openapi.json",
    "/",
    "/v4/PROJECT/hello",
    "/v4/PROJECT/hello/",
    "/v4/PROJECT",
  ])("serves nothing else of the surface: %s", async (path) => {
    const { seed, on, host } = await setup();
    const { status, body } = await on(path.replace("PROJECT", seed.projectId));
    expect(status).toBe(404);
    expect(body).toMatchObject({
      code: "not_found",
      detail: `${host} serves only /v4/{project_id}/{app_name}/{path} of its own project.`,
    });
  });

  it.each([
    "/.well-known/acme-challenge/abc",
    "/.well-known/pki-validation/fileauth.txt",
    "/.well-known/acme-challenge/",
  ])("never passes %s to an app", async (path) => {
    const { on } = await setup();
    const { status, body } = await on(path, { token: null });
    expect(status).toBe(404);
    expect(String(body.detail)).toContain("No certificate validation token");
  });

  it("matches the Host header case-insensitively, with a port or a trailing dot", async () => {
    const { seed, on, host } = await setup();
    for (const variant of [host.toUpperCase(), `${host}:8443`, `${host}.`]) {
      expect(ran(await on(seed.runPath, { host: variant }))).toBe(true);
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
    for (const [host, status] of [
      [pending, "pending"],
      [failed, "failed"],
    ]) {
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
    expect(ran(await on(seed.runPath))).toBe(true);
    await w.api.json(`/v2/projects/${seed.projectId}/domains/${host}`, { method: "DELETE", token: seed.token });
    expect((await on(`/v4/${seed.projectId}/hello/run`)).body.code).toBe("unknown_host");
  });

  it("serves a domain as soon as it is validated, even after its host was cached as pending", async () => {
    const { w, seed } = await setup();
    const host = `${uniqueLabel("late")}.example.test`;
    await addDomain(w.api, seed, host);
    expect((await w.api.json(`/v4/${seed.projectId}/hello/run`, { token: seed.token, host })).body.code).toBe(
      "unknown_host",
    );
    w.dns.set(host, "ok");
    await validate(w.api, seed, host);
    expect(ran(await w.api.json(seed.runPath, { token: seed.token, host }))).toBe(true);
  });
});

describe("host routing: the hot path", () => {
  it("makes no D1 query for a warm host: the isolate cache answers until its TTL", async () => {
    const { seed, on, host, w } = await setup();
    expect(ran(await on(seed.runPath))).toBe(true);
    // Remove the row behind the cache's back: only a D1 lookup could notice.
    await env.DB.prepare("DELETE FROM domains WHERE hostname = ?").bind(host).run();
    expect(ran(await on(seed.runPath))).toBe(true);
    // The promise is a number (SECURITY.md, docs/domains.md: up to 60 s), pinned here, not the constant.
    w.api.clock.advance(60_000);
    expect((await on(`/v4/${seed.projectId}/hello/run`)).body.code).toBe("unknown_host");
  });
});
