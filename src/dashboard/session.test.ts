import { describe, expect, it } from "vitest";
import {
  csrfToken,
  csrfTokenValid,
  decodeSession,
  encodeSession,
  newSession,
  sameOrigin,
  SESSION_TTL_MS,
  sessionKey,
} from "./session";

const NOW = Date.parse("2026-11-21T12:00:00Z");
const ADMIN_A = "admin-token-a-0123456789abcdefghijklmnop";
const ADMIN_B = "admin-token-b-0123456789abcdefghijklmnop";

describe("session cookie", () => {
  it("round-trips a signed session until it expires", async () => {
    const key = await sessionKey(ADMIN_A);
    const session = newSession(NOW, true);
    const value = await encodeSession(key, session);
    expect(await decodeSession(key, value, NOW)).toEqual(session);
    expect(await decodeSession(key, value, NOW + SESSION_TTL_MS - 1)).toEqual(session);
    expect(await decodeSession(key, value, NOW + SESSION_TTL_MS)).toBeNull();
  });

  it("rejects a session whose payload was changed (an anonymous session made signed-in)", async () => {
    const key = await sessionKey(ADMIN_A);
    const value = await encodeSession(key, newSession(NOW, false));
    const [payload, signature] = value.split(".");
    const data = JSON.parse(atob(payload!.replace(/-/g, "+").replace(/_/g, "/"))) as Record<string, unknown>;
    const forged = btoa(JSON.stringify({ ...data, in: true }))
      .replace(/\+/g, "-")
      .replace(/\//g, "_")
      .replace(/=+$/, "");
    expect(await decodeSession(key, `${forged}.${signature}`, NOW)).toBeNull();
  });

  it("rejects malformed values without throwing", async () => {
    const key = await sessionKey(ADMIN_A);
    for (const value of [undefined, "", "abc", "a.b.c", "!!!.???", `${"a".repeat(2000)}.b`, "eyJ2IjoxfQ.AAAA"]) {
      expect(await decodeSession(key, value, NOW)).toBeNull();
    }
  });

  it("ends every session when the admin token is rotated (the key is derived from it)", async () => {
    const value = await encodeSession(await sessionKey(ADMIN_A), newSession(NOW, true));
    expect(await decodeSession(await sessionKey(ADMIN_B), value, NOW)).toBeNull();
  });

  it("gives each session a fresh random id", () => {
    expect(newSession(NOW, true).sid).not.toBe(newSession(NOW, true).sid);
  });
});

describe("CSRF token", () => {
  it("is bound to the session it was issued for", async () => {
    const key = await sessionKey(ADMIN_A);
    const mine = newSession(NOW, true);
    const other = newSession(NOW, true);
    const token = await csrfToken(key, mine);
    expect(await csrfTokenValid(key, mine, token)).toBe(true);
    expect(await csrfTokenValid(key, other, token)).toBe(false);
  });

  it("refuses a missing, empty, oversized or non-string token", async () => {
    const key = await sessionKey(ADMIN_A);
    const session = newSession(NOW, true);
    for (const token of [undefined, "", "x".repeat(200), 42, { value: "x" }]) {
      expect(await csrfTokenValid(key, session, token)).toBe(false);
    }
  });

  it("is not valid under another admin token's key", async () => {
    const session = newSession(NOW, true);
    const token = await csrfToken(await sessionKey(ADMIN_A), session);
    expect(await csrfTokenValid(await sessionKey(ADMIN_B), session, token)).toBe(false);
  });
});

describe("Origin check", () => {
  const url = "https://api.service.test/dashboard/projects";
  it("accepts the page's own origin", () => {
    expect(sameOrigin(url, new Headers({ Origin: "https://api.service.test" }))).toBe(true);
  });
  it("refuses another origin, another scheme, and the opaque origin", () => {
    for (const origin of ["https://evil.example", "http://api.service.test", "https://api.service.test:8443", "null"]) {
      expect(sameOrigin(url, new Headers({ Origin: origin }))).toBe(false);
    }
  });
  it("without Origin, accepts only Sec-Fetch-Site: same-origin", () => {
    expect(sameOrigin(url, new Headers({ "Sec-Fetch-Site": "same-origin" }))).toBe(true);
    expect(sameOrigin(url, new Headers({ "Sec-Fetch-Site": "cross-site" }))).toBe(false);
    expect(sameOrigin(url, new Headers())).toBe(false);
  });
});
