import { env } from "cloudflare:workers";
import { parse } from "smol-toml";
import { describe, expect, it } from "vitest";
import wranglerToml from "../../wrangler.toml?raw";
import { client, seedProject } from "../../test/helpers";
import { RATE_LIMITS } from "./rate-limit";

/** A stand-in for the rate limiting binding that allows the first `allow` calls per key and records them. */
function limiter(allow: number) {
  const counts = new Map<string, number>();
  return {
    counts,
    async limit({ key }: { key: string }) {
      counts.set(key, (counts.get(key) ?? 0) + 1);
      return { success: counts.get(key)! <= allow };
    },
  };
}

describe("rate limiting of the management API", () => {
  it("answers 429 with Retry-After and RateLimit headers once a credential is over its limit", async () => {
    const tokenLimiter = limiter(2);
    const api = client({}, { RATE_LIMIT_TOKEN: tokenLimiter });
    const { projectId, token, serviceAccountId } = await seedProject(api);
    // Seeding used the token once (creating the app).
    const allowed = await api.json(`/v2/projects/${projectId}`, { token });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get("ratelimit-policy")).toContain(`"token";q=${RATE_LIMITS.token.limit};w=60`);
    const limited = await api.json(`/v2/projects/${projectId}`, { token });
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe("rate_limited");
    expect(limited.headers.get("retry-after")).toBe("60");
    expect(limited.headers.get("ratelimit")).toBe('"token";r=0;t=60');
    expect([...tokenLimiter.counts.keys()]).toEqual([serviceAccountId]);
    // The operator's token is not limited per credential.
    expect((await api.json(`/v2/projects/${projectId}`)).status).toBe(200);
  });

  it("limits by client address before authentication, so guessing tokens is slowed too", async () => {
    const ipLimiter = limiter(1);
    const api = client({}, { RATE_LIMIT_IP: ipLimiter });
    const headers = { "CF-Connecting-IP": "198.51.100.7" };
    expect((await api.json("/v2/projects", { token: "guess-1", headers })).status).toBe(401);
    const limited = await api.json("/v2/projects", { token: "guess-2", headers });
    expect(limited.status).toBe(429);
    expect(limited.headers.get("ratelimit-policy")).toBe(`"ip";q=${RATE_LIMITS.ip.limit};w=60`);
    // Another address is unaffected.
    expect((await api.json("/v2/projects", { headers: { "CF-Connecting-IP": "198.51.100.8" } })).status).toBe(200);
  });

  it("is configured in wrangler.toml with the limits the code states, in every environment", () => {
    interface Section {
      ratelimits?: { name: string; simple: { limit: number; period: number } }[];
      env?: Record<string, Section>;
    }
    const config = parse(wranglerToml) as Section;
    for (const section of [config, ...Object.values(config.env ?? {})]) {
      const configured = Object.fromEntries((section.ratelimits ?? []).map((r) => [r.name, r.simple]));
      for (const { binding, limit, period } of Object.values(RATE_LIMITS)) {
        expect(configured[binding]).toEqual({ limit, period });
      }
    }
  });

  it("is enforced by the runtime's binding at the configured limit", async () => {
    const { limit, period } = RATE_LIMITS.token;
    // The binding's windows are aligned to the wall clock. The budget is spent up to a few requests short
    // side by side (a hundred calls at a time: seconds, not a minute, on a busy machine), then request by
    // request across the limit. If the window rolled over meanwhile, the counts of that try say nothing,
    // and the probe is made again with a fresh key in the new window.
    const windowOf = () => Math.floor(Date.now() / (period * 1000));
    for (let tries = 1; ; tries++) {
      const key = `probe-${crypto.randomUUID()}`;
      const window = windowOf();
      let spent = 0;
      while (spent < limit - 3) {
        const calls = Math.min(100, limit - 3 - spent);
        const allowed = await Promise.all(
          Array.from({ length: calls }, () => env.RATE_LIMIT_TOKEN!.limit({ key }).then((r) => r.success)),
        );
        expect(allowed.every(Boolean)).toBe(true);
        spent += calls;
      }
      const answers: boolean[] = [];
      for (let i = 0; i < 6; i++) answers.push((await env.RATE_LIMIT_TOKEN!.limit({ key })).success);
      if (windowOf() !== window && tries < 3) continue;
      // Requests limit - 2, limit - 1 and limit are allowed; the next three are refused.
      expect(answers).toEqual([true, true, true, false, false, false]);
      return;
    }
    // Miniflare's limiter is a Durable Object doing one SQLite write per call: 600 of them take seconds.
  }, 60_000);
});
