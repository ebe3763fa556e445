import type { Database } from "../db/client";
import type { Deps } from "../platform/context";
import type { Config, Env } from "../platform/env";

/**
 * What a run reads from its request and the service. The router builds it from Hono's context; the
 * fast path (`fast-path.ts`) builds it without the router. Everything a run does goes through it, so
 * both entries behave the same.
 */
export interface RunScope {
  request: Request;
  env: Env;
  ctx: Pick<ExecutionContext, "waitUntil">;
  deps: Deps;
  config: Config;
  db: Database;
  requestId: string;
}
