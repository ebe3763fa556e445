/**
 * D1's interface over a Durable Object's SQLite storage, so that code written for D1 (drizzle on D1,
 * `prepared` statements, `StatementGroup`) runs unchanged against a store kept per project in objects.
 * D1 is itself SQLite behind a request per statement or batch; this is the same contract with the object
 * as the database: `d1Over(send)` gives a `D1Database` whose every statement (or batch) is one call of
 * `send`, and `runSql(storage, calls)` is what the object does with such a call. Inside the object, `send`
 * calls `runSql` directly; from a Worker, it is the object's RPC (one subrequest, as a D1 query is).
 *
 * What D1 promises and this keeps: a batch is one transaction (`transactionSync`: all or nothing); a
 * statement's `meta.changes` is SQLite's `changes()` (rows the statement itself changed, not its
 * triggers'); values bind as D1 binds them (a boolean as 1 or 0; `undefined` refused); rows come back
 * with D1's types (integers as numbers, text as strings). What it does not offer: sessions, `dump`.
 */

/** A value as SQLite storage binds and returns it. */
export type SqlValue = ArrayBuffer | string | number | null;

/** One statement as it travels to the object: its text and its values, bound as D1 binds them. */
export interface SqlCall {
  sql: string;
  params: SqlValue[];
}

/** What the object answers for one statement: its rows as arrays (compact over RPC), their columns, and `changes()`. */
export interface SqlAnswer {
  columns: string[];
  rows: SqlValue[][];
  changes: number;
  rowsRead: number;
  rowsWritten: number;
}

/** Runs `calls` on `storage`, several in one transaction (a D1 batch's promise): the object's side of `d1Over`. */
export function runSql(storage: DurableObjectStorage, calls: SqlCall[]): SqlAnswer[] {
  const one = ({ sql, params }: SqlCall): SqlAnswer => {
    const cursor = storage.sql.exec(sql, ...params);
    const rows = [...cursor.raw()];
    // `changes()` keeps the last write's count through reads: asked only when this statement wrote.
    const changes = cursor.rowsWritten === 0 ? 0 : storage.sql.exec<{ n: number }>("SELECT changes() AS n").one().n;
    return { columns: cursor.columnNames, rows, changes, rowsRead: cursor.rowsRead, rowsWritten: cursor.rowsWritten };
  };
  if (calls.length === 1) return [one(calls[0]!)];
  return storage.transactionSync(() => calls.map(one));
}

/** A value bound as D1 binds it: a boolean as 1 or 0, bytes as an ArrayBuffer; `undefined` and objects refused, as D1 refuses them. */
function bound(value: unknown): SqlValue {
  if (value === null || typeof value === "string" || typeof value === "number") return value;
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "bigint") return Number(value);
  if (value instanceof ArrayBuffer) return value;
  if (ArrayBuffer.isView(value))
    return value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength) as ArrayBuffer;
  throw new TypeError(`D1_TYPE_ERROR: Type '${typeof value}' not supported for value '${String(value)}'`);
}

const rowObject = (columns: string[], row: SqlValue[]) =>
  Object.fromEntries(columns.map((column, i) => [column, row[i]])) as Record<string, unknown>;

function result<T>(answer: SqlAnswer): D1Result<T> {
  return {
    success: true,
    results: answer.rows.map((row) => rowObject(answer.columns, row)) as T[],
    meta: {
      duration: 0,
      size_after: 0,
      rows_read: answer.rowsRead,
      rows_written: answer.rowsWritten,
      last_row_id: 0,
      changed_db: answer.changes > 0,
      changes: answer.changes,
    },
  };
}

/** A statement of a `d1Over` database: bound values, and its call when run. */
class ObjectStatement {
  constructor(
    private readonly send: (calls: SqlCall[]) => Promise<SqlAnswer[]>,
    readonly call: SqlCall,
  ) {}

  bind(...values: unknown[]): ObjectStatement {
    return new ObjectStatement(this.send, { sql: this.call.sql, params: values.map(bound) });
  }

  async #answer(): Promise<SqlAnswer> {
    return (await this.send([this.call]))[0]!;
  }

  async all<T>(): Promise<D1Result<T>> {
    return result<T>(await this.#answer());
  }

  run<T>(): Promise<D1Result<T>> {
    return this.all<T>();
  }

  async first<T>(column?: string): Promise<T | null> {
    const answer = await this.#answer();
    const [row] = answer.rows;
    if (row === undefined) return null;
    const object = rowObject(answer.columns, row);
    return (column === undefined ? object : (object[column] ?? null)) as T | null;
  }

  async raw<T>(options?: { columnNames?: boolean }): Promise<T[]> {
    const answer = await this.#answer();
    return (options?.columnNames ? [answer.columns, ...answer.rows] : answer.rows) as T[];
  }
}

/** The `D1Database` whose statements and batches each go to the object in one call of `send`. */
export function d1Over(send: (calls: SqlCall[]) => Promise<SqlAnswer[]>): D1Database {
  const database = {
    prepare: (sql: string) => new ObjectStatement(send, { sql, params: [] }),
    batch: async <T>(statements: D1PreparedStatement[]): Promise<D1Result<T>[]> => {
      if (statements.length === 0) return [];
      const answers = await send((statements as unknown as ObjectStatement[]).map((s) => s.call));
      return answers.map((answer) => result<T>(answer));
    },
    // Several statements in one text, as D1's `exec` takes them (SQLite storage runs them in order).
    exec: async (sql: string): Promise<D1ExecResult> => {
      await send([{ sql, params: [] }]);
      return { count: 1, duration: 0 };
    },
    withSession: () => {
      throw new Error("A database in a Durable Object has no sessions: it is its own primary.");
    },
    dump: () => {
      throw new Error("A database in a Durable Object is not dumped.");
    },
  };
  return database as unknown as D1Database;
}
