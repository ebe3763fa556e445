import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { callWith, seedRunnable } from "../../test/runs";
import { TEST_SECRETS } from "../../test/secrets";

// Rotating JWT_SECRET (docs/operations.md): the new secret signs, the previous one still verifies
// run JWTs issued before the rotation until JWT_SECRET_PREVIOUS is removed.
const api = client();
const NEW_SECRET = "rotated-jwt-secret-0123456789abcdefghijklmnop";
const exp = () => Math.floor(api.clock.now().getTime() / 1000) + 600;

describe("run JWTs across a JWT_SECRET rotation", () => {
  it("accepts JWTs of the new secret and of JWT_SECRET_PREVIOUS, and nothing else", async () => {
    const app = await seedRunnable(api);
    const claims = { project_id: app.projectId, exp: exp() };
    const rotating = { JWT_SECRET: NEW_SECRET, JWT_SECRET_PREVIOUS: TEST_SECRETS.JWT_SECRET };
    const oldJwt = await sign(claims, TEST_SECRETS.JWT_SECRET, "HS256");
    const newJwt = await sign(claims, NEW_SECRET, "HS256");
    const strangerJwt = await sign(claims, "a-third-secret-0123456789abcdefghijklmnopqr", "HS256");

    expect((await callWith(api, rotating, app.runPath, { token: oldJwt })).status).toBe(200);
    expect((await callWith(api, rotating, app.runPath, { token: newJwt })).status).toBe(200);
    expect((await callWith(api, rotating, app.runPath, { token: strangerJwt })).status).toBe(401);
    // The previous secret verifies only within the run's own rules: another project's id is still a 404.
    const otherProject = await sign(
      { ...claims, project_id: `proj_${"0".repeat(30)}` },
      TEST_SECRETS.JWT_SECRET,
      "HS256",
    );
    expect((await callWith(api, rotating, app.runPath, { token: otherProject })).status).toBe(404);
  });

  it("refuses the old secret's JWTs once JWT_SECRET_PREVIOUS is removed", async () => {
    const app = await seedRunnable(api);
    const oldJwt = await sign({ project_id: app.projectId, exp: exp() }, TEST_SECRETS.JWT_SECRET, "HS256");
    const res = await callWith(api, { JWT_SECRET: NEW_SECRET }, app.runPath, { token: oldJwt });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toMatch(/^Bearer /);
  });

  it("refuses a JWT_SECRET_PREVIOUS shorter than 32 characters with a configuration problem naming it", async () => {
    const app = await seedRunnable(api);
    const res = await callWith(api, { JWT_SECRET: NEW_SECRET, JWT_SECRET_PREVIOUS: "short" }, app.runPath, {
      token: app.token,
    });
    expect(res.status).toBe(500);
    const body = (await res.json()) as { code: string; detail: string };
    expect(body.code).toBe("configuration_error");
    expect(body.detail).toContain("JWT_SECRET_PREVIOUS");
    expect(body.detail).not.toContain("short");
  });
});
