import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import * as schema from "./schema";

export type Database = DrizzleD1Database<typeof schema>;

// drizzle builds its relational config from the schema on every call: once per binding is enough.
const databases = new WeakMap<D1Database, Database>();

export function createDb(d1: D1Database): Database {
  let db = databases.get(d1);
  if (!db) {
    db = drizzle(d1, { schema });
    databases.set(d1, db);
  }
  return db;
}
