/**
 * A Durable Object's storage as the code under test uses it, watched: each statement its `sql.exec`
 * runs, with its cursor (rows read, rows written), in order.
 */

/** `target` with `value` in place of its property `key`; its methods bound to it, as the runtime's are. */
function withProperty<T extends object>(target: T, key: PropertyKey, value: unknown): T {
  return new Proxy(target, {
    get: (t, k) => {
      if (k === key) return value;
      const own = Reflect.get(t, k, t) as unknown;
      return typeof own === "function" ? (own as (...a: unknown[]) => unknown).bind(t) : own;
    },
  });
}

/** `storage` with every `sql.exec` recorded in `execs` (its query and its cursor). */
export function recordingStorage(storage: DurableObjectStorage) {
  const execs: { query: string; cursor: SqlStorageCursor<Record<string, SqlStorageValue>> }[] = [];
  const sql = withProperty(storage.sql, "exec", (query: string, ...bindings: unknown[]) => {
    const cursor = storage.sql.exec(query, ...bindings);
    execs.push({ query, cursor });
    return cursor;
  });
  return { storage: withProperty(storage, "sql", sql), execs };
}

/** `state` with `storage` in place of its own (an object's code built on it sees only that). */
export const withStorage = (state: DurableObjectState, storage: DurableObjectStorage): DurableObjectState =>
  withProperty(state, "storage", storage);
