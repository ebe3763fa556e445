import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { countingRoundTrips, seedRunnable } from "../../test/runs";
import { generateToken } from "../auth/tokens";
import { RATE_LIMITS } from "../platform/rate-limit";

describe("back-pressure on runs", () => {
  it("answers 429 rate_limited with Retry-After once a project has spent RATE_LIMIT_RUNS; another project is unaffected", async () => {
    const api = client();
    const busy = await seedRunnable(api);
    const other = await seedRunnable(api);
    // Spend the busy project's budget on Miniflare's real limiter, as its runs would.
    for (let i = 0; i < RATE_LIMITS.runs.limit; i++) await env.RATE_LIMIT_RUNS!.limit({ key: busy.projectId });
    const limited = await api.json(busy.runPath, { token: busy.token });
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe("rate_limited");
    expect(limited.headers.get("retry-after")).toBe(String(RATE_LIMITS.runs.period));
    expect((await api.json(other.runPath, { token: other.token })).status).toBe(200);
  }, 30_000);

  it("refuses an unknown well-formed token without a second D1 read", async () => {
    const d1 = countingRoundTrips(env.DB);
    const api = client({}, { DB: d1.db });
    const app = await seedRunnable(api);
    const forged = generateToken();
    expect((await api.json(app.runPath, { token: forged })).status).toBe(401);
    const before = d1.trips();
    expect((await api.json(app.runPath, { token: forged })).status).toBe(401);
    expect(d1.trips()).toBe(before);
  });

  it("counts failed authentication on /v4 against the caller's address", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const headers = { "CF-Connecting-IP": `198.51.100.${Math.floor(Math.random() * 200)}` };
    // The valid key is used once first, so this isolate knows it (a key it must read counts too).
    expect((await api.json(app.runPath, { token: app.token, headers })).status).toBe(200);
    for (let i = 0; i < RATE_LIMITS.ip.limit; i++) await env.RATE_LIMIT_IP!.limit({ key: headers["CF-Connecting-IP"] });
    const limited = await api.json(app.runPath, { token: generateToken(), headers });
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe("rate_limited");
    expect(limited.headers.get("retry-after")).toBe("60");
    // A valid key this isolate knows still runs from the same address: it costs no read, and is not counted.
    expect((await api.json(app.runPath, { token: app.token, headers })).status).toBe(200);
  });
});
