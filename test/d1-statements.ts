import { aroundD1 } from "../src/platform/subrequests";
/**
 * D1 as a run's work sees it: every binding made by `binding(source)` records each statement it runs
 * (its SQL, who ran it, and whether the run's caller had its answer yet) and each round trip (a
 * statement's `all`, `run`, `first` or `raw`, a `batch`, an `exec`), through src/platform/subrequests.ts's
 * `aroundD1`, which gives each round trip's SQL (D1PreparedStatement has no public getter of it).
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

  const record = (source: string, sql: string[]) => {
    roundTrips.push({ source, onPath, statements: sql.length });
    for (const s of sql) statements.push({ sql: s, source, onPath });
  };

  const bindings = new Map<string, D1Database>();
  /** The binding `source` runs its statements on (one per source: drizzle's client is kept per binding). */
  function binding(source: string): D1Database {
    const known = bindings.get(source);
    if (known) return known;
    const made = aroundD1(real, (sql) => record(source, sql));
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
