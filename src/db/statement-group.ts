import { fillPlaceholders, getTableColumns, is, type Query, SQL, type Table } from "drizzle-orm";
import type { Database } from "./client";

/**
 * A statement drizzle renders once per isolate, with `sql.placeholder(name)` where its values go
 * (wrapped in `sql.param(…, column)` for the column's own encoding); each use only binds values. The
 * webhook consumer's statements run for every delivery: this keeps drizzle's query building (a
 * measurable share of their CPU) off that path. It yields a D1 statement, not a drizzle query, because
 * drizzle's own `db.batch` cannot batch raw `sql` on D1 (drizzle-orm#2277: "Cannot read properties of
 * undefined (reading 'bind')"); `StatementGroup` batches D1 statements itself.
 */
export function prepared<Values extends Record<string, unknown>>(build: () => SQL) {
  let query: Query | undefined;
  return (db: Database, values: Values): D1PreparedStatement => {
    // One line, as drizzle renders its own: logs and tests read a statement by its text.
    query ??= (({ sql, params }) => ({ sql: sql.replace(/\n\s*/g, " "), params }))(db.all(build()).getQuery());
    return db.$client.prepare(query.sql).bind(...fillPlaceholders(query.params, values));
  };
}

/**
 * `row`'s values for every column of `table`, keyed by field name, in the driver's encoding (a
 * timestamp as ms, a boolean as 0/1), a column's JavaScript default where `row` has no value: what
 * drizzle's `.values(row)` binds, for a `prepared` INSERT of every column with placeholders named by field.
 */
export function driverValues<T extends Table>(table: T, row: Partial<T["$inferInsert"]>): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const [key, column] of Object.entries(getTableColumns(table))) {
    let value = (row as Record<string, unknown>)[key];
    if (value === undefined) value = column.defaultFn ? column.defaultFn() : column.hasDefault ? column.default : null;
    if (is(value, SQL)) throw new Error(`${column.name}: an SQL default cannot be bound`);
    values[key] = value === null || value === undefined ? null : column.mapToDriverValue(value);
  }
  return values;
}

/** A row as D1 returns it (column names, driver values) as `table`'s fields: what drizzle's own select maps it to. */
export function fromDriver<T extends Table>(table: T, raw: Record<string, unknown>): T["$inferSelect"] {
  const row: Record<string, unknown> = {};
  for (const [key, column] of Object.entries(getTableColumns(table))) {
    const value = raw[column.name];
    row[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
  }
  return row as T["$inferSelect"];
}

interface Waiting {
  statement: D1PreparedStatement;
  resolve: (result: D1Result) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for the concurrent tasks of one invocation: statements that arrive close together
 * travel to D1 as one `batch` (one round trip, one subrequest) instead of one each. A statement waits
 * for the others while some task `hold`s the group (it is about to write too: a request is in flight
 * whose outcome follows), never longer than `windowMs`; with nothing held it goes at the next turn of
 * the event loop, together with whatever else arrived in the same turn.
 *
 * A D1 batch is one transaction: if it fails, every statement in it fails with the same error, as it
 * would have alone. Statements put in a group must therefore not fail for reasons of their own (a
 * constraint one row breaks), or they would take their neighbours down with them; the callers here
 * guard their writes in SQL instead (`INSERT … SELECT … WHERE EXISTS`).
 */
export class StatementGroup {
  #waiting: Waiting[] = [];
  #holds = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerDue = 0;
  /** D1 round trips made, and statements sent: tests and the bench read them. */
  trips = 0;
  statements = 0;

  constructor(
    private readonly db: Database,
    private readonly windowMs: number,
  ) {}

  /** Runs `statement` with whatever else is ready; resolves to its own result, as `statement.all()` would. */
  run<Row = Record<string, unknown>>(statement: D1PreparedStatement): Promise<D1Result<Row>> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ statement, resolve: resolve as (result: D1Result) => void, reject });
      this.#schedule();
    });
  }

  /** Marks a write as coming (a request whose outcome will be recorded); the returned function says it has come or will not. */
  hold(): () => void {
    this.#holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#holds--;
      if (this.#waiting.length > 0) this.#schedule();
    };
  }

  #schedule() {
    const delay = this.#holds > 0 ? this.windowMs : 0;
    const due = Date.now() + delay;
    if (this.#timer !== undefined) {
      // Already due no later than this: keep it. Otherwise (a hold released) bring it forward.
      if (this.#timerDue <= due) return;
      clearTimeout(this.#timer);
    }
    this.#timerDue = due;
    this.#timer = setTimeout(() => void this.#flush(), delay);
  }

  async #flush() {
    this.#timer = undefined;
    const group = this.#waiting;
    this.#waiting = [];
    if (group.length === 0) return;
    this.trips++;
    this.statements += group.length;
    try {
      if (group.length === 1) {
        group[0]!.resolve(await group[0]!.statement.all());
        return;
      }
      const results = await this.db.$client.batch(group.map((w) => w.statement));
      group.forEach((w, i) => w.resolve(results[i]!));
    } catch (error) {
      for (const w of group) w.reject(error);
    }
  }
}
