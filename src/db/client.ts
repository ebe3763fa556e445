import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import * as schema from "./schema";

export type Database = DrizzleD1Database<typeof schema> & { $client: D1Database };

// drizzle builds its relational config from the schema on every call: once per binding is enough.
const databases = new WeakMap<D1Database, Database>();

export function createDb(d1: D1Database): Database {
  // Without a binding (a route that needs no storage, served by a test) there is nothing to keep.
  if (typeof d1 !== "object" || d1 === null) return drizzle(d1, { schema });
  let db = databases.get(d1);
  if (!db) {
    db = drizzle(d1, { schema });
    databases.set(d1, db);
  }
  return db;
}
