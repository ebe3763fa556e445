import { ApiError } from "../platform/errors";
import { RATE_LIMITS } from "../platform/rate-limit";
import type { Scope } from "../platform/scope";
import { runCaller, type RunCaller } from "./run-key";

function limited(policy: "runs" | "ip", what: string): ApiError {
  const { limit, period } = RATE_LIMITS[policy];
  return new ApiError("rate_limited", `Too many ${what}; retry in up to ${period} s.`, {
    headers: { "Retry-After": String(period), "RateLimit-Policy": `"${policy}";q=${limit};w=${period}`, RateLimit: `"${policy}";r=0;t=${period}` },
  });
}

/**
 * The caller of a run, with failed authentication counted against its address (`RATE_LIMIT_IP`):
 * once an address has spent its budget, a further bad key is answered 429 rather than 401, so guessing
 * is slowed as on the management API. Only Cloudflare's edge sets `cf-connecting-ip`.
 */
export async function admitCaller(scope: Scope, request: Request): Promise<RunCaller> {
  try {
    return await runCaller(scope, request);
  } catch (error) {
    const ip = request.headers.get("cf-connecting-ip");
    const limiter = scope.env.RATE_LIMIT_IP;
    if (error instanceof ApiError && error.status === 401 && ip && limiter && !(await limiter.limit({ key: ip })).success) {
      throw limited("ip", "failed authentications from this client address");
    }
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
