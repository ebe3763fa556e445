import { createMiddleware } from "hono/factory";
import { createDb, type Database } from "../db/client";
import type { Deps } from "./deps";
import { type Config, getConfig } from "./env";
import { newId } from "./ids";

/**
 * Everything one invocation of the Worker works with: a request, a queue batch or a cron tick. Every
 * entry point builds it with `createScope`, so a handler, a consumer and the cron see the service the
 * same way.
 */
export interface Scope {
  /** Echoed as `X-Request-Id` and quoted in every problem and log line of the invocation. */
  requestId: string;
  env: Env;
  ctx: Pick<ExecutionContext, "waitUntil">;
  config: Config;
  db: Database;
  deps: Deps;
}

/** The scope of one invocation. Throws the configuration problem when a setting is missing or malformed. */
export function createScope(env: Env, ctx: Pick<ExecutionContext, "waitUntil">, deps: Deps): Scope {
  return { requestId: newId("req"), env, ctx, config: getConfig(env), db: createDb(env.DB), deps };
}

/** The Hono environment of every router: the bindings, and the invocation's scope. */
export interface AppEnv {
  Bindings: Env;
  Variables: { scope: Scope };
}

/** Builds the request's scope for the router's handlers and echoes its id as `X-Request-Id`. */
export const scopeMiddleware = (deps: Deps) =>
  createMiddleware<AppEnv>(async (c, next) => {
    // `executionCtx` is read when work is handed to it, not before: a router driven without one
    // (Hono's `app.request` in a unit test) still serves what needs none.
    c.set("scope", createScope(c.env, { waitUntil: (work) => c.executionCtx.waitUntil(work) }, deps));
    await next();
    c.res.headers.set("X-Request-Id", c.var.scope.requestId);
  });
