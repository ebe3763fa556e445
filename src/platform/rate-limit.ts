import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "./scope";
import { addressKey } from "./address";
import { ApiError } from "./errors";

/**
 * The management API's limits. They live in wrangler.toml as Workers rate limiting bindings
 * (`[[ratelimits]]`, counted per Cloudflare location, so approximate by design); a test keeps the two
 * in agreement. The admin token is only limited by IP: it is the operator's way back in.
 */
export const RATE_LIMITS = {
  ip: { binding: "RATE_LIMIT_IP", limit: 1200, period: 60 },
  token: { binding: "RATE_LIMIT_TOKEN", limit: 600, period: 60 },
  /** Runs per project on /v4 (src/runs/rate-limits.ts). */
  runs: { binding: "RATE_LIMIT_RUNS", limit: 6000, period: 60 },
} as const;

type Policy = "ip" | "token";

const policyHeader = (name: Policy) => `"${name}";q=${RATE_LIMITS[name].limit};w=${RATE_LIMITS[name].period}`;

async function enforce(c: Context<AppEnv>, name: Policy, key: string) {
  const { binding, period } = RATE_LIMITS[name];
  const limiter = c.env[binding];
  // Without the binding (a deployment that removed it) requests are not limited; wrangler.toml has it.
  if (!limiter) return;
  const { success } = await limiter.limit({ key });
  if (success) return;
  throw new ApiError(
    "rate_limited",
    `Too many requests for this ${name === "ip" ? "client address" : "credential"}; retry in up to ${period} s.`,
    {
      headers: {
        "Retry-After": String(period),
        "RateLimit-Policy": policyHeader(name),
        RateLimit: `"${name}";r=0;t=${period}`,
      },
    },
  );
}

/** Per client address, before authentication: also slows down guessing of tokens. */
export const rateLimitByIp = createMiddleware<AppEnv>(async (c, next) => {
  // Only Cloudflare's edge sets this header; without it (local development) there is no address to count.
  const ip = c.req.header("cf-connecting-ip");
  // An IPv6 address by its /64: one subscriber's addresses are one budget.
  if (ip) await enforce(c, "ip", addressKey(ip));
  await next();
  c.res.headers.append("RateLimit-Policy", policyHeader("ip"));
});

/** Per credential, after authentication. */
export const rateLimitByToken = createMiddleware<AppEnv>(async (c, next) => {
  const principal = c.get("principal");
  if (principal.kind === "service_account") await enforce(c, "token", principal.serviceAccountId);
  await next();
  if (principal.kind === "service_account") c.res.headers.append("RateLimit-Policy", policyHeader("token"));
});
