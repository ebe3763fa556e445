/**
 * The SQLite storage of a Durable Object, made and migrated in one way for every class: today's
 * `schema`, and the ordered `steps` that bring storage made by earlier code to it, counted by a version
 * (the steps applied) kept under the key `schema` of the object's (key, value) `meta` table.
 * docs/architecture.md ("Durable Objects").
 */

/** A change to storage made before it: statements, or code for a change that must look first. */
export type StorageStep = readonly string[] | ((sql: SqlStorage) => void);

export interface StorageShape {
  /** The (key, value) table that keeps the version, and its values' type (the object may keep other keys in it). */
  meta: { table: string; value: "INTEGER" | "TEXT" };
  /** A table every object of the class has made since its first version: absent, the storage is new. */
  made: string;
  /** Today's tables and indexes, each `IF NOT EXISTS`: they alone make a new object's storage. */
  schema: readonly string[];
  /** Every change since the first version, oldest first; never reordered or removed, only added to. */
  steps: readonly StorageStep[];
}

/**
 * Brings `storage` to `shape`. A new object is made by the schema and starts with every step counted. An
 * object made before has the steps it lacks applied in order, then the schema (whatever it gained
 * since: a table or an index, made `IF NOT EXISTS`). An object made before it kept a version counts as
 * having had no step: a step meant for such objects checks what it changes before it changes it. A
 * step therefore meets the storage as the steps before it left it, not as the schema makes it.
 *
 * One transaction, in the constructor, before any request reaches the object: a step that throws
 * leaves the storage as it found it (the object fails to start, and tries again at the next request).
 * Returns the version found.
 */
export function migrateStorage(storage: DurableObjectStorage, shape: StorageShape): number {
  return storage.transactionSync(() => migrate(storage.sql, shape));
}

function migrate(sql: SqlStorage, shape: StorageShape): number {
  const made = sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", shape.made).toArray();
  const meta = shape.meta.table;
  sql.exec(`CREATE TABLE IF NOT EXISTS ${meta} (key TEXT PRIMARY KEY, value ${shape.meta.value} NOT NULL)`);
  const recorded = sql.exec<{ value: number | string }>(`SELECT value FROM ${meta} WHERE key = 'schema'`).toArray();
  const found = made.length === 0 ? shape.steps.length : recorded.length > 0 ? Number(recorded[0]!.value) : 0;
  for (let applied = found; applied < shape.steps.length; applied++) {
    const step = shape.steps[applied]!;
    if (typeof step === "function") step(sql);
    else for (const statement of step) sql.exec(statement);
  }
  for (const statement of shape.schema) sql.exec(statement);
  // Never lowered: storage that newer code migrated (before a rollback) keeps its version for it.
  if (recorded.length === 0 || Number(recorded[0]!.value) < shape.steps.length)
    sql.exec(
      `INSERT INTO ${meta} (key, value) VALUES ('schema', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
      shape.steps.length,
    );
  return found;
}
