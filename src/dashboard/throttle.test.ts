import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { clearAttempts, clientIp, MAX_ATTEMPTS, countSignInAttempt, WINDOW_MS, waitText } from "./throttle";

const NOW = Date.parse("2026-11-21T12:00:00Z");
let n = 0;
const ip = () => `192.0.2.${++n}`;

async function attempts(address: string, count: number, at = NOW) {
  const results = [];
  for (let i = 0; i < count; i++) results.push(await countSignInAttempt(env.DB, address, at));
  return results;
}

describe("sign-in throttling", () => {
  it("allows MAX_ATTEMPTS attempts per window and refuses the next, saying when to retry", async () => {
    const address = ip();
    const results = await attempts(address, MAX_ATTEMPTS + 1);
    expect(results.slice(0, MAX_ATTEMPTS)).toEqual([4, 3, 2, 1, 0].map((remaining) => ({ allowed: true, remaining })));
    expect(results[MAX_ATTEMPTS]).toEqual({ allowed: false, retryAfterSeconds: WINDOW_MS / 1000 });
    expect(await countSignInAttempt(env.DB, address, NOW + 20_000)).toEqual({
      allowed: false,
      retryAfterSeconds: WINDOW_MS / 1000 - 20,
    });
  });

  it("counts each address on its own", async () => {
    const blocked = ip();
    await attempts(blocked, MAX_ATTEMPTS + 1);
    expect((await countSignInAttempt(env.DB, ip(), NOW)).allowed).toBe(true);
  });

  it("starts a new window once the old one has ended", async () => {
    const address = ip();
    await attempts(address, MAX_ATTEMPTS + 1);
    expect((await countSignInAttempt(env.DB, address, NOW + WINDOW_MS)).allowed).toBe(true);
  });

  it("clears an address's count after a successful sign-in", async () => {
    const address = ip();
    await attempts(address, MAX_ATTEMPTS);
    await clearAttempts(env.DB, address);
    expect((await attempts(address, MAX_ATTEMPTS)).every((r) => r.allowed)).toBe(true);
  });

  it("keeps the table bounded: rows of ended windows are dropped", async () => {
    const old = ip();
    await attempts(old, 1, NOW - 2 * WINDOW_MS);
    await countSignInAttempt(env.DB, ip(), NOW);
    const row = await env.DB.prepare("SELECT ip FROM sign_in_attempts WHERE ip = ?1").bind(old).first();
    expect(row).toBeNull();
  });

  it("states the wait in seconds under a minute, in minutes beyond", () => {
    expect([1, 40, 60, 61].map(waitText)).toEqual(["1 second", "40 seconds", "1 minute", "2 minutes"]);
  });

  it("reads the client address from CF-Connecting-IP", () => {
    expect(clientIp(new Headers({ "CF-Connecting-IP": "2001:db8::1" }))).toBe("2001:db8:0:0::/64");
    expect(clientIp(new Headers({ "CF-Connecting-IP": "203.0.113.9" }))).toBe("203.0.113.9");
    expect(clientIp(new Headers())).toBe("unknown");
  });
});
