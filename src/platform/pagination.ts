import { and, asc, desc, gt, lt, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Database } from "../db/client";
import { fromBase64Url, toBase64Url } from "./encoding";
import { invalidField } from "./errors";

/**
 * Cursors are opaque to clients: base64url of the sort key of the last item of a page, versioned so
 * their form can change without breaking clients that hold one.
 */
export function encodeCursor(key: string): string {
  return toBase64Url(new TextEncoder().encode(JSON.stringify({ v: 1, k: key })));
}

export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  try {
    const json: unknown = JSON.parse(new TextDecoder().decode(fromBase64Url(cursor)));
    if (
      typeof json === "object" &&
      json !== null &&
      "v" in json &&
      json.v === 1 &&
      "k" in json &&
      typeof json.k === "string"
    ) {
      return json.k;
    }
  } catch {
    // fall through: any undecodable cursor gets the same answer
  }
  throw invalidField("query", "cursor", "is not a valid cursor", "The cursor is not one this API issued.");
}

/** Fetch `limit + 1` rows; this trims the extra one and says where the next page starts. */
export function page<T>(rows: T[], limit: number, keyOf: (row: T) => string) {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? encodeCursor(keyOf(last)) : null };
}

export interface ListOptions<Row> {
  /** What the rows must match besides the cursor (the project, a filter). */
  filter: SQL | undefined;
  /** The unique text column the list is ordered by, and its value on a row. */
  key: SQLiteColumn;
  keyOf: (row: Row) => string;
  order: "asc" | "desc";
  limit: number;
  cursor: string | undefined;
}

/** One page of a list endpoint: the rows after the cursor in `key` order, and the next cursor. */
export async function listPage<T extends SQLiteTable>(db: Database, table: T, options: ListOptions<T["$inferSelect"]>) {
  const after = decodeCursor(options.cursor);
  const { key, order } = options;
  const rows = (await db
    .select()
    .from(table as SQLiteTable)
    .where(and(options.filter, after === undefined ? undefined : order === "asc" ? gt(key, after) : lt(key, after)))
    .orderBy(order === "asc" ? asc(key) : desc(key))
    .limit(options.limit + 1)) as T["$inferSelect"][];
  return page(rows, options.limit, options.keyOf);
}
