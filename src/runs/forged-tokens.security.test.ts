import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { countingRoundTrips, seedRunnable, spentBudget } from "../../test/runs";
import { generateToken } from "../auth/tokens";
import { addressKey } from "../platform/address";
import { RATE_LIMITS } from "../platform/rate-limit";

/**
 * The attack: a token's checksum is a public CRC32, so anyone mints well-formed tokens at will, each new
 * to the negative cache. Each one used to cost a D1 read, even after the address had spent its budget.
 */

/** An address no other test spends from (the limiter's counts outlive a test), in a /64 of its own. */
const freshAddress = () =>
  `2001:db8:${crypto
    .getRandomValues(new Uint16Array(2))
    .reduce((text, n) => `${text}:${n.toString(16)}`, "")
    .slice(1)}::1`;

/** Miniflare's real address limiter, with its calls counted. */
function countingLimiter() {
  let calls = 0;
  const real = env.RATE_LIMIT_IP!;
  return {
    limiter: { limit: (options: { key: string }) => (calls++, real.limit(options)) } as RateLimit,
    calls: () => calls,
  };
}

describe("forged tokens sprayed at the run path", () => {
  it("once the address's budget is spent, distinct forged well-formed tokens cost no D1 round trip: each is a 429", async () => {
    const d1 = countingRoundTrips(env.DB);
    const headers = { "CF-Connecting-IP": freshAddress() };
    const api = client(
      {},
      { DB: d1.db, RATE_LIMIT_IP: spentBudget(env.RATE_LIMIT_IP, addressKey(headers["CF-Connecting-IP"])) },
    );
    const app = await seedRunnable(api);
    const before = d1.trips();
    for (let i = 0; i < 5; i++) {
      const refused = await api.json(app.runPath, { token: generateToken(), headers });
      expect(refused.status).toBe(429);
      expect(refused.body.code).toBe("rate_limited");
      expect(refused.headers.get("retry-after")).toBe(String(RATE_LIMITS.ip.period));
    }
    expect(d1.trips() - before).toBe(0);
  });

  it("a forged token before the budget is spent costs one read, and counts against the address once", async () => {
    const d1 = countingRoundTrips(env.DB);
    const counted = countingLimiter();
    const api = client({}, { DB: d1.db, RATE_LIMIT_IP: counted.limiter });
    const app = await seedRunnable(api);
    const headers = { "CF-Connecting-IP": freshAddress() };
    const before = { trips: d1.trips(), calls: counted.calls() };
    expect((await api.json(app.runPath, { token: generateToken(), headers })).status).toBe(401);
    expect({ trips: d1.trips() - before.trips, calls: counted.calls() - before.calls }).toEqual({ trips: 1, calls: 1 });
  });

  it("a key this isolate knows runs without a call to the address limiter (the usual run costs nothing more)", async () => {
    const counted = countingLimiter();
    const api = client({}, { RATE_LIMIT_IP: counted.limiter });
    const app = await seedRunnable(api);
    const headers = { "CF-Connecting-IP": freshAddress() };
    expect((await api.json(app.runPath, { token: app.token, headers })).status).toBe(200);
    // The first run read the token (and was counted once); every later run within the cache's life is free.
    const warm = counted.calls();
    expect(warm).toBe(1);
    for (let i = 0; i < 5; i++) expect((await api.json(app.runPath, { token: app.token, headers })).status).toBe(200);
    expect(counted.calls()).toBe(warm);
  });
});
