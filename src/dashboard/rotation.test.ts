import { describe, expect, it } from "vitest";
import { ADMIN, client } from "../../test/helpers";
import { visitor } from "../../test/dashboard-helpers";

// Rotating ADMIN_TOKEN (docs/operations.md): with ADMIN_TOKEN_PREVIOUS set to the token being replaced,
// sessions and forms signed before the rotation keep working (and are signed again under the new
// token); the previous token itself is no credential anywhere.
const NEW_ADMIN = "rotated-admin-token-0123456789abcdefghijklmnop";
const before = client();
const during = client({ now: before.clock.now }, { ADMIN_TOKEN: NEW_ADMIN, ADMIN_TOKEN_PREVIOUS: ADMIN });
const after = client({ now: before.clock.now }, { ADMIN_TOKEN: NEW_ADMIN });

async function signedInBefore() {
  const browser = visitor(before);
  expect((await browser.signIn()).status).toBe(303);
  expect((await browser.get("/dashboard/projects")).status).toBe(200);
  return browser;
}

describe("dashboard sessions across an ADMIN_TOKEN rotation", () => {
  it("keeps a session signed before the rotation, and signs its cookie again under the new token", async () => {
    const old = await signedInBefore();
    const browser = visitor(during);
    browser.cookie = old.cookie;
    const page = await browser.get("/dashboard/projects");
    expect(page.status).toBe(200);
    expect(page.headers.getSetCookie().join()).toMatch(/eg_session=/);
    // The re-signed cookie is the new token's: it holds once the previous token is removed.
    const later = visitor(after);
    later.cookie = browser.cookie;
    expect((await later.get("/dashboard/projects")).status).toBe(200);
  });

  it("accepts a form shown before the rotation (its CSRF token is the previous token's)", async () => {
    const old = await signedInBefore();
    const browser = visitor(during);
    browser.cookie = old.cookie;
    const out = await browser.post("/dashboard/sign-out", {}, { csrf: old.csrf });
    expect(out.status).toBe(303);
    expect(out.location).toBe("/dashboard/sign-in");
  });

  it("ends sessions signed under the old token when no previous token is set", async () => {
    const old = await signedInBefore();
    const browser = visitor(after);
    browser.cookie = old.cookie;
    const page = await browser.get("/dashboard/projects");
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toMatch(/^\/dashboard\/sign-in/);
  });

  it("never accepts the previous token as a credential: not on the API, not as a run key, not at sign-in", async () => {
    expect((await during.json("/v2/projects", { token: ADMIN })).status).toBe(401);
    expect((await during.json("/v2/projects", { token: NEW_ADMIN })).status).toBe(200);
    const browser = visitor(during);
    const refused = await browser.signIn(ADMIN);
    expect(refused.status).not.toBe(303);
    expect((await visitor(during).signIn(NEW_ADMIN)).status).toBe(303);
  });
});
