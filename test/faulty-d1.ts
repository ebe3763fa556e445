/**
 * D1 failing under the gateway: a wrapper of the real binding throws, as D1 does when it is overloaded
 * or loses its connection, on the statements a test chooses (`fails(sql)`). The statements it refused
 * are kept in `refused`, with the values bound to them, so a test can look for those values where
 * they must not be (the logs).
 */
export const FAULT = "D1_ERROR: Network connection lost. (injected)";

export interface Refused {
  sql: string;
  values: unknown[];
}

type Statement = D1PreparedStatement & { __sql?: string; __real?: D1PreparedStatement; __values?: unknown[] };

export function faultyD1(real: D1Database, fails: (sql: string) => boolean, refused: Refused[] = []): D1Database {
  const wrap = (statement: D1PreparedStatement, sql: string, bound: unknown[] = []): Statement =>
    new Proxy(statement, {
      get(target, prop) {
        if (prop === "__sql") return sql;
        if (prop === "__real") return target;
        if (prop === "__values") return bound;
        if (prop === "bind") return (...values: unknown[]) => wrap(target.bind(...values), sql, values);
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return async (...args: unknown[]) => {
            if (fails(sql)) {
              refused.push({ sql, values: bound });
              throw new Error(FAULT);
            }
            return (target[prop] as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    }) as Statement;
  return new Proxy(real, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql), sql);
      if (prop === "batch") {
        return async (statements: Statement[]) => {
          // A batch is one transaction: one failing statement fails it whole.
          const failing = statements.filter((s) => fails(s.__sql ?? ""));
          if (failing.length > 0) {
            for (const s of failing) refused.push({ sql: s.__sql ?? "", values: s.__values ?? [] });
            throw new Error(FAULT);
          }
          return target.batch(statements.map((s) => s.__real ?? s));
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** One statement a `readingD1` ran: its SQL and the size of what it answered (its rows as JSON). */
export interface Read {
  sql: string;
  bytes: number;
}

/**
 * D1 that tells what it was asked and how much it answered: each statement run through the wrapper is
 * pushed to `reads` with the size of its rows, so a test can hold a path to what it reads (a column list
 * that left out a large column, a read that must come once).
 */
export function readingD1(real: D1Database, reads: Read[]): D1Database {
  const size = (answer: unknown) => {
    const rows = (answer as { results?: unknown } | null)?.results ?? answer;
    return rows === undefined || rows === null ? 0 : JSON.stringify(rows).length;
  };
  const wrap = (statement: D1PreparedStatement, sql: string): D1PreparedStatement =>
    new Proxy(statement, {
      get(target, prop) {
        if (prop === "__real") return target;
        if (prop === "bind") return (...values: unknown[]) => wrap(target.bind(...values), sql);
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return async (...args: unknown[]) => {
            const answer = await (target[prop] as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            reads.push({ sql, bytes: size(answer) });
            return answer;
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  return new Proxy(real, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql), sql);
      // A batch's statements go to D1 as themselves (not counted).
      if (prop === "batch") return (statements: Statement[]) => target.batch(statements.map((s) => s.__real ?? s));
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
