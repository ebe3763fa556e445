import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { keptRun, startAsync } from "../../test/async-runs";
import { callWith, countingRoundTrips, seedRunnable, spentBudget } from "../../test/runs";
import { generateToken } from "../auth/tokens";
import { RATE_LIMITS } from "../platform/rate-limit";
import { addressKey } from "../platform/address";

describe("back-pressure on runs", () => {
  it("answers 429 rate_limited with Retry-After once a project has spent RATE_LIMIT_RUNS; another project is unaffected", async () => {
    const runs = spentBudget(env.RATE_LIMIT_RUNS);
    const api = client({}, { RATE_LIMIT_RUNS: runs });
    const busy = await seedRunnable(api);
    const other = await seedRunnable(api);
    runs.spend(busy.projectId);
    const limited = await api.json(busy.runPath, { token: busy.token });
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe("rate_limited");
    expect(limited.headers.get("retry-after")).toBe(String(RATE_LIMITS.runs.period));
    // The other project's runs are counted on Miniflare's real limiter, well within its budget.
    expect((await api.json(other.runPath, { token: other.token })).status).toBe(200);
  });

  it("counts reading and cancelling an async run in the project's run budget: polling is traffic", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app);
    expect(started.response.status).toBe(202);
    const statusPath = new URL(started.body.status_url).pathname;
    // Each read and each cancel costs one count, as a run does.
    let counted = 0;
    const runs = { limit: (options: { key: string }) => (counted++, env.RATE_LIMIT_RUNS!.limit(options)) } as RateLimit;
    expect((await callWith(api, { RATE_LIMIT_RUNS: runs }, statusPath, { token: app.token })).status).toBe(200);
    expect(counted).toBe(1);
    const spent = spentBudget(env.RATE_LIMIT_RUNS, app.projectId);
    for (const method of ["GET", "DELETE"]) {
      const limited = await callWith(api, { RATE_LIMIT_RUNS: spent }, statusPath, { method, token: app.token });
      expect(limited.status, method).toBe(429);
      expect(((await limited.json()) as { code: string }).code).toBe("rate_limited");
      expect(limited.headers.get("retry-after")).toBe(String(RATE_LIMITS.runs.period));
    }
    // The run was not cancelled by the refused DELETE.
    expect((await keptRun(started.body))?.status).toBe("queued");
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
    const address = spentBudget(env.RATE_LIMIT_IP);
    const api = client({}, { RATE_LIMIT_IP: address });
    const app = await seedRunnable(api);
    const headers = { "CF-Connecting-IP": `198.51.100.${Math.floor(Math.random() * 200)}` };
    // The valid key is used once first, so this isolate knows it (a key it must read counts too).
    expect((await api.json(app.runPath, { token: app.token, headers })).status).toBe(200);
    address.spend(addressKey(headers["CF-Connecting-IP"]));
    const limited = await api.json(app.runPath, { token: generateToken(), headers });
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe("rate_limited");
    expect(limited.headers.get("retry-after")).toBe("60");
    // A valid key this isolate knows still runs from the same address: it costs no read, and is not counted.
    expect((await api.json(app.runPath, { token: app.token, headers })).status).toBe(200);
  });
});
