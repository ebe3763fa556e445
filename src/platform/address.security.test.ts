import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { visitor } from "../../test/dashboard-helpers";
import { callWith, seedRunnable } from "../../test/runs";
import { generateToken } from "../auth/tokens";
import { addressKey } from "./address";

/** Budgets per address against a caller who holds a whole IPv6 /64 (issue 33, finding 6). */

const api = client();

/** A limiter that allows `limit` calls per key, keeping the keys it was asked about. */
function limiterOf(limit: number) {
  const counts = new Map<string, number>();
  return {
    binding: {
      limit: async ({ key }: { key: string }) => {
        counts.set(key, (counts.get(key) ?? 0) + 1);
        return { success: counts.get(key)! <= limit };
      },
    } as RateLimit,
    keys: () => [...counts.keys()],
  };
}

/** A /64 no other test uses, and its n-th address. */
function fresh64() {
  const [a, b] = crypto.getRandomValues(new Uint16Array(2));
  return (n: number) => `2001:db8:${a!.toString(16)}:${b!.toString(16)}::${n.toString(16)}`;
}

describe("addressKey", () => {
  it("keys an IPv6 address by its /64 in every spelling, an IPv4 one (mapped too) by itself", () => {
    expect(addressKey("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:DB8:1:2:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:0db8:0001:0002:0:0:0:6")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8:1:3::1")).toBe("2001:db8:1:3::/64");
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
    expect(addressKey("203.0.113.9")).toBe("203.0.113.9");
    expect(addressKey("::ffff:203.0.113.9")).toBe("203.0.113.9");
    expect(addressKey(" 203.0.113.9 ")).toBe("203.0.113.9");
    expect(addressKey("fe80::1%eth0")).toBe("fe80::1%eth0");
    expect(addressKey("x".repeat(500))).toHaveLength(64);
  });
});

describe("attack: one caller's IPv6 /64 taken for 2^64 addresses (33.6)", () => {
  it("forged tokens from …::1 to …::6 of one /64 spend one forged-token budget: once spent, each is a 429", async () => {
    const app = await seedRunnable(api);
    const limiter = limiterOf(1);
    const at = fresh64();
    const statuses: number[] = [];
    for (let n = 1; n <= 6; n++) {
      const res = await callWith(api, { RATE_LIMIT_IP: limiter.binding }, app.runPath, {
        token: generateToken(),
        headers: { "CF-Connecting-IP": at(n) },
      });
      statuses.push(res.status);
    }
    expect(statuses).toEqual([401, 429, 429, 429, 429, 429]);
    expect(limiter.keys()).toEqual([addressKey(at(1))]);
  });

  it("the management API's per-address limit counts …::1 to …::6 of one /64 as one address", async () => {
    const limiter = limiterOf(1);
    const at = fresh64();
    const statuses: number[] = [];
    for (let n = 1; n <= 6; n++) {
      const res = await callWith(api, { RATE_LIMIT_IP: limiter.binding }, "/v2/projects", {
        headers: { "CF-Connecting-IP": at(n) },
      });
      statuses.push(res.status);
    }
    expect(statuses.slice(1)).toEqual([429, 429, 429, 429, 429]);
    expect(limiter.keys()).toEqual([addressKey(at(1))]);
  });

  it("the dashboard's sign-in throttle counts …::1 to …::6 of one /64 as one address", async () => {
    const at = fresh64();
    const results = [];
    for (let n = 1; n <= 6; n++) results.push(await visitor(api, { ip: at(n) }).signIn("wrong-token"));
    expect(results.slice(0, 5).map((r) => r.html)).not.toContain("Too many sign-in attempts");
    expect(results[5]!.html).toContain("Too many sign-in attempts");
  });
});
