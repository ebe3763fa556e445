import type { Database } from "../db/client";
import type { Principal } from "../auth/principal";
import type { Config, Env } from "./env";

/**
 * What handlers reach the outside world and the clock through. Production wires the real ones;
 * tests and local development pass others to `createApp` instead of branching on the environment.
 */
export interface Deps {
  now(): Date;
  /** Requests to the outside world on a customer's behalf: app upstreams and webhook receivers. */
  outbound: Outbound;
}

export interface Outbound {
  fetch(request: Request): Promise<Response>;
}

export const defaultDeps: Deps = {
  now: () => new Date(),
  outbound: { fetch: (request) => fetch(request) },
};

export interface AppEnv {
  Bindings: Env;
  Variables: {
    requestId: string;
    config: Config;
    db: Database;
    deps: Deps;
    /** Set by `authenticate`; read only on routes behind it. */
    principal: Principal;
  };
}
