/**
 * D1 as a run's work sees it: every binding made by `binding(source)` records each statement it runs
 * (its SQL, who ran it, and whether the run's caller had its answer yet) and each round trip (a
 * statement's `all`, `run`, `first` or `raw`, a `batch`, an `exec`), as src/platform/subrequests.ts's
 * `aroundD1` counts them. D1PreparedStatement has no public getter of its SQL, so `prepare` keeps it.
 */

export interface Statement {
  sql: string;
  /** Who ran it: the Worker's invocation, a lane, a keeper, the async runs' consumer. */
  source: string;
  /** Ran before the run's caller had its whole answer (`answered`). */
  onPath: boolean;
}

export interface RoundTrip {
  source: string;
  onPath: boolean;
  statements: number;
}

export function statementLog(real: D1Database) {
  const statements: Statement[] = [];
  const roundTrips: RoundTrip[] = [];
  let onPath = true;
  const sqlOf = new WeakMap<object, string>();
  const realOf = new WeakMap<object, D1PreparedStatement>();

  const record = (source: string, sql: string[]) => {
    roundTrips.push({ source, onPath, statements: sql.length });
    for (const s of sql) statements.push({ sql: s, source, onPath });
  };

  const statement = (source: string, real: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const wrapped = new Proxy(real, {
      get(t, prop) {
        if (prop === "bind") return (...values: unknown[]) => statement(source, t.bind(...values), sql);
        const value = Reflect.get(t, prop) as unknown;
        if (prop === "all" || prop === "run" || prop === "first" || prop === "raw")
          return (...args: unknown[]) => {
            record(source, [sql]);
            return (value as (...a: unknown[]) => Promise<unknown>).apply(t, args);
          };
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(t) : value;
      },
    });
    sqlOf.set(wrapped, sql);
    realOf.set(wrapped, real);
    return wrapped;
  };

  const bindings = new Map<string, D1Database>();
  /** The binding `source` runs its statements on (one per source: drizzle's client is kept per binding). */
  function binding(source: string): D1Database {
    const known = bindings.get(source);
    if (known) return known;
    const made = new Proxy(real, {
      get(t, prop) {
        if (prop === "prepare") return (sql: string) => statement(source, t.prepare(sql), sql);
        if (prop === "batch")
          return (batch: D1PreparedStatement[]) => {
            record(
              source,
              batch.map((s) => sqlOf.get(s) ?? "(unknown)"),
            );
            return t.batch(batch.map((s) => realOf.get(s) ?? s));
          };
        if (prop === "exec")
          return (query: string) => {
            record(source, [query]);
            return t.exec(query);
          };
        // A session would run statements past this wrapper: none of the gateway's code opens one.
        if (prop === "withSession") throw new Error("statementLog: withSession is not recorded");
        const value = Reflect.get(t, prop) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(t) : value;
      },
    });
    bindings.set(source, made);
    return made;
  }

  return {
    statements,
    roundTrips,
    binding,
    /** The run's caller has its whole answer: what runs from now is off the run's path. */
    answered() {
      onPath = false;
    },
    /** Forgets what was recorded (a warm-up's statements) and starts on a run's path again. */
    clear() {
      statements.length = 0;
      roundTrips.length = 0;
      onPath = true;
    },
  };
}

export type StatementLog = ReturnType<typeof statementLog>;

/** The tables `sql` writes (INSERT INTO, UPDATE, DELETE FROM) and reads (FROM, JOIN), quoted or not. */
export function tablesOf(sql: string): { writes: string[]; reads: string[] } {
  // `ON CONFLICT … DO UPDATE SET` writes the table its INSERT names; `DELETE FROM t` is no read of t.
  const text = sql.replace(/\bdo\s+update\b/gi, " ");
  const writes = [...text.matchAll(/\b(?:insert(?:\s+or\s+\w+)?\s+into|update|delete\s+from)\s+["`]?(\w+)/gi)].map(
    (m) => m[1]!,
  );
  const reads = [
    ...text.replace(/\bdelete\s+from\b/gi, " ").matchAll(/\b(?:from|join)\s+["`]?(\w+)["`]?(?!\s*\()/gi),
  ].map((m) => m[1]!);
  return { writes: [...new Set(writes)].sort(), reads: [...new Set(reads)].sort() };
}

/** What `statements` did to D1: how many, and the tables they wrote and read. */
export function summaryOf(statements: Statement[], roundTrips: RoundTrip[]) {
  const writes = new Set<string>();
  const reads = new Set<string>();
  for (const s of statements) {
    const tables = tablesOf(s.sql);
    tables.writes.forEach((t) => writes.add(t));
    tables.reads.forEach((t) => reads.add(t));
  }
  return {
    statements: statements.length,
    roundTrips: roundTrips.length,
    onPath: statements.filter((s) => s.onPath).length,
    roundTripsOnPath: roundTrips.filter((r) => r.onPath).length,
    writes: [...writes].sort(),
    reads: [...reads].sort(),
  };
}
