import { addressKey } from "../platform/address";
import { ApiError } from "../platform/errors";
import { RATE_LIMITS } from "../platform/rate-limit";
import type { Scope } from "../platform/scope";
import { runCaller, type RunCaller } from "./run-key";

function limited(policy: "runs" | "ip", what: string): ApiError {
  const { limit, period } = RATE_LIMITS[policy];
  return new ApiError("rate_limited", `Too many ${what}; retry in up to ${period} s.`, {
    headers: {
      "Retry-After": String(period),
      "RateLimit-Policy": `"${policy}";q=${limit};w=${period}`,
      RateLimit: `"${policy}";r=0;t=${period}`,
    },
  });
}

/**
 * The caller of a run, with its address (`RATE_LIMIT_IP`) counted before D1 is asked about a token this
 * isolate does not know, and after any other failed authentication (a bad JWT, a token known to be
 * unknown, a wrong admin token). A forged token's checksum is public, so once an address has spent its
 * budget each new forgery is answered 429 without a D1 read; a token this isolate knows (the cached,
 * usual case) costs no call to the limiter at all. A known token from a spent address is refused too
 * when this isolate must read it (at most once per `TOKEN_CACHE_TTL_MS`): the address is guessing
 * keys, and its traffic is one budget. Only Cloudflare's edge sets `cf-connecting-ip`; an IPv6 address
 * is counted by its /64 (`addressKey`).
 */
export async function admitCaller(scope: Scope, request: Request): Promise<RunCaller> {
  const ip = request.headers.get("cf-connecting-ip");
  const limiter = scope.env.RATE_LIMIT_IP;
  if (!ip || !limiter) return runCaller(scope, request);
  let counted = false;
  const count = async () => {
    counted = true;
    if (!(await limiter.limit({ key: addressKey(ip) })).success)
      throw limited("ip", "unknown keys and failed authentications from this client address");
  };
  try {
    return await runCaller(scope, request, { beforeRead: count });
  } catch (error) {
    // A failure whose read was already counted is not counted twice.
    if (error instanceof ApiError && error.status === 401 && !counted) await count();
    throw error;
  }
}

/**
 * Runs per project (`RATE_LIMIT_RUNS`, counted per Cloudflare location, so approximate by design):
 * one project's burst is refused with 429 and `Retry-After`; other projects keep their own budget.
 */
export async function admitRun(scope: Scope, projectId: string): Promise<void> {
  const limiter = scope.env.RATE_LIMIT_RUNS;
  // Without the binding (a deployment that removed it) runs are not limited; wrangler.toml has it.
  if (!limiter) return;
  if (!(await limiter.limit({ key: projectId })).success) throw limited("runs", "runs for this project");
}
