import type { Deps } from "./deps";

/**
 * Cloudflare counts every subrequest an invocation makes against one limit: fetch, D1, R2, KV, Queues
 * and Durable Object calls alike (50 on Workers Free, 10,000 on Paid by today's limits page). A long
 * invocation that plans its work by that limit (a webhook lane's alarm) counts what it really made,
 * through bindings wrapped here, rather than charging each piece of work its worst case.
 */

/**
 * `database` with `before` awaited ahead of each D1 round trip (a statement's `all`, `run`, `first`,
 * `raw`, or a `batch` or `exec`), given the SQL of the trip's statements ("(unknown)" for a statement
 * not prepared through this binding). A session would run statements past it: `withSession` throws.
 */
export function aroundD1(database: D1Database, before: (sql: string[]) => unknown): D1Database {
  // `batch` takes the statements `prepare` made: the real ones behind the wrappers, and their SQL.
  const realOf = new WeakMap<object, { real: D1PreparedStatement; sql: string }>();
  const statement = (real: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const wrapped = new Proxy(real, {
      get(t, prop) {
        if (prop === "bind") return (...values: unknown[]) => statement(t.bind(...values), sql);
        const value = Reflect.get(t, prop) as unknown;
        if (prop === "all" || prop === "run" || prop === "first" || prop === "raw")
          return async (...args: unknown[]) => {
            await before([sql]);
            return (value as (...a: unknown[]) => Promise<unknown>).apply(t, args);
          };
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(t) : value;
      },
    });
    realOf.set(wrapped, { real, sql });
    return wrapped;
  };
  return new Proxy(database, {
    get(t, prop) {
      if (prop === "prepare") return (query: string) => statement(t.prepare(query), query);
      if (prop === "batch")
        return async (statements: D1PreparedStatement[]) => {
          await before(statements.map((s) => realOf.get(s)?.sql ?? "(unknown)"));
          return t.batch(statements.map((s) => realOf.get(s)?.real ?? s));
        };
      if (prop === "exec")
        return async (query: string) => {
          await before([query]);
          return t.exec(query);
        };
      // None of the gateway's code opens a session; one would go uncounted.
      if (prop === "withSession")
        return () => {
          throw new Error("aroundD1: withSession is not wrapped");
        };
      const value = Reflect.get(t, prop) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(t) : value;
    },
  });
}

/** `binding` with `before` run ahead of each call of its methods: an R2 bucket, a queue, a Durable Object's stub. */
function aroundCalls<T extends object>(binding: T, before: () => void): T {
  return new Proxy(binding, {
    get(t, prop) {
      const value = Reflect.get(t, prop) as unknown;
      if (typeof value !== "function" || prop === "then") return value;
      return (...args: unknown[]) => {
        before();
        // Reflect.apply: an RPC stub's method would take `.apply` for a remote method of that name.
        return Reflect.apply(value as (...a: unknown[]) => unknown, t, args);
      };
    },
  });
}

/** A Durable Object namespace whose stubs count each call (a call to an object is a subrequest; making its id or stub is not). */
function aroundNamespace<T extends DurableObjectNamespace>(namespace: T, before: () => void): T {
  return new Proxy(namespace, {
    get(t, prop) {
      const value = Reflect.get(t, prop) as unknown;
      if (typeof value !== "function") return value;
      if (prop === "get" || prop === "getByName")
        return (...args: unknown[]) =>
          aroundCalls(Reflect.apply(value as (...a: unknown[]) => object, t, args), before);
      return (value as (...a: unknown[]) => unknown).bind(t);
    },
  });
}

const has = (value: object, ...methods: string[]) =>
  methods.every((m) => typeof (value as Record<string, unknown>)[m] === "function");

/** The subrequests one invocation made through the env and deps it was given (`env`, `deps`). */
export class SubrequestMeter {
  made = 0;
  readonly #count = () => {
    this.made++;
  };

  /** `env` whose D1 databases, R2 buckets, KV namespaces, queues and Durable Object namespaces count each call. */
  env(env: Env): Env {
    const metered: Record<string, unknown> = { ...env };
    for (const [name, binding] of Object.entries(env as unknown as Record<string, unknown>)) {
      if (typeof binding !== "object" || binding === null) continue;
      if (has(binding, "prepare", "batch")) metered[name] = aroundD1(binding as D1Database, this.#count);
      else if (has(binding, "idFromName"))
        metered[name] = aroundNamespace(binding as DurableObjectNamespace, this.#count);
      else if (
        has(binding, "get", "put", "head") ||
        has(binding, "get", "put", "getWithMetadata") ||
        has(binding, "send", "sendBatch")
      )
        metered[name] = aroundCalls(binding, this.#count);
    }
    return metered as unknown as Env;
  }

  /** `deps` whose outbound requests (apps, webhook receivers) count. */
  deps(deps: Deps): Deps {
    return {
      ...deps,
      outbound: {
        fetch: (request) => {
          this.#count();
          return deps.outbound.fetch(request);
        },
      },
    };
  }
}
