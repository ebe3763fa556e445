import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { migrateStorage, type StorageShape } from "../../src/platform/object-storage";
import { followersObject } from "../../src/runs/async/followers";
import { Keeper } from "../../src/runs/wait/keeper";
import { keeperObject } from "../../src/runs/wait/shard";
import type { OutcomePort } from "../../src/runs/outcome";
import { Ledger } from "../../src/usage/ledger";
import { ledgerOf } from "../../src/usage/ledger-client";
import { Lane } from "../../src/webhooks/lane";
import { laneObject } from "../../src/webhooks/message";
import { testDeps } from "../helpers";

/**
 * Every Durable Object's SQLite storage is made and migrated one way (`migrateStorage`: today's schema,
 * ordered steps, a version): the helper's rules, and each object whose storage code changed to it
 * starting on storage that today's code made, rows and all.
 */

let n = 0;
/** A scratch storage of its own: a followers object's, which keeps no table of its own. */
const scratch = <T>(work: (storage: DurableObjectStorage) => T) =>
  runInDurableObject(followersObject(env, `storage-test-${Date.now()}-${n++}`), (_instance, state) =>
    work(state.storage),
  );

const rows = (storage: DurableObjectStorage, query: string) => storage.sql.exec(query).toArray();
const versionOf = (storage: DurableObjectStorage, table = "meta") =>
  rows(storage, `SELECT value FROM ${table} WHERE key = 'schema'`)[0]?.value ?? null;

/** Notes: today's shape of `notes`, and the two steps that brought the first notes to it. */
function notes(applied: string[]): StorageShape {
  return {
    meta: { table: "notes_meta", value: "INTEGER" },
    made: "notes",
    schema: [
      "CREATE TABLE IF NOT EXISTS notes (id TEXT PRIMARY KEY, body TEXT NOT NULL, at INTEGER NOT NULL DEFAULT 0)",
      "CREATE INDEX IF NOT EXISTS notes_at ON notes (at)",
      "CREATE TABLE IF NOT EXISTS tags (note TEXT NOT NULL, tag TEXT NOT NULL)",
    ],
    steps: [
      (sql) => {
        applied.push("rename");
        sql.exec("ALTER TABLE notes RENAME COLUMN text TO body");
      },
      (sql) => {
        applied.push("at");
        sql.exec("ALTER TABLE notes ADD COLUMN at INTEGER NOT NULL DEFAULT 0");
      },
    ],
  };
}

describe("migrateStorage", () => {
  it("makes new storage from the schema alone, every step counted as applied", async () => {
    await scratch((storage) => {
      const applied: string[] = [];
      expect(migrateStorage(storage, notes(applied))).toBe(2);
      expect(applied).toEqual([]);
      expect(versionOf(storage, "notes_meta")).toBe(2);
      storage.sql.exec("INSERT INTO notes (id, body, at) VALUES ('a', 'x', 1)");
    });
  });

  it("applies to storage made before versions every step in order, then the schema, keeping its rows; once", async () => {
    await scratch((storage) => {
      storage.sql.exec("CREATE TABLE notes (id TEXT PRIMARY KEY, text TEXT NOT NULL)");
      storage.sql.exec("INSERT INTO notes VALUES ('old', 'kept')");
      const applied: string[] = [];
      // The schema's index is on a column a step adds: the steps come first.
      expect(migrateStorage(storage, notes(applied))).toBe(0);
      expect(applied).toEqual(["rename", "at"]);
      expect(rows(storage, "SELECT id, body, at FROM notes")).toEqual([{ id: "old", body: "kept", at: 0 }]);
      expect(rows(storage, "SELECT count(*) AS n FROM tags")).toEqual([{ n: 0 }]);
      expect(versionOf(storage, "notes_meta")).toBe(2);
      // The object starts again: nothing is applied twice.
      expect(migrateStorage(storage, notes(applied))).toBe(2);
      expect(applied).toEqual(["rename", "at"]);
    });
  });

  it("applies only the steps after the version storage has", async () => {
    await scratch((storage) => {
      storage.sql.exec("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)");
      storage.sql.exec("CREATE TABLE notes_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)");
      storage.sql.exec("INSERT INTO notes_meta VALUES ('schema', 1), ('other', 7)");
      const applied: string[] = [];
      expect(migrateStorage(storage, notes(applied))).toBe(1);
      expect(applied).toEqual(["at"]);
      expect(rows(storage, "SELECT key, value FROM notes_meta ORDER BY key")).toEqual([
        { key: "other", value: 7 },
        { key: "schema", value: 2 },
      ]);
    });
  });

  it("leaves storage as it found it when a step throws, and never lowers a newer version", async () => {
    await scratch((storage) => {
      storage.sql.exec("CREATE TABLE notes (id TEXT PRIMARY KEY, text TEXT NOT NULL)");
      const failing = notes([]);
      const broken: StorageShape = {
        ...failing,
        steps: [
          failing.steps[0]!,
          () => {
            throw new Error("a step that fails");
          },
        ],
      };
      expect(() => migrateStorage(storage, broken)).toThrow("a step that fails");
      // The first step's rename and the version table: both undone.
      expect(rows(storage, "SELECT name FROM pragma_table_info('notes')").map((c) => c.name)).toEqual(["id", "text"]);
      expect(rows(storage, "SELECT name FROM sqlite_master WHERE name = 'notes_meta'")).toEqual([]);

      expect(migrateStorage(storage, notes([]))).toBe(0);
      // Older code (a rollback) on storage that newer code migrated: its version stays the newer one's.
      const older = notes([]);
      expect(migrateStorage(storage, { ...older, steps: older.steps.slice(0, 1) })).toBe(2);
      expect(versionOf(storage, "notes_meta")).toBe(2);
    });
  });
});

describe("objects whose storage today's code made start on it with every row", () => {
  it("a keeper (its tables had no version): its runs and keys are kept, its version is the first", async () => {
    const stub = keeperObject(env, `proj_storage:${Date.now()}`);
    await runInDurableObject(stub, (_instance, state) => {
      const sql = state.storage.sql;
      for (const table of ["kept_runs", "run_keys", "meta"]) sql.exec(`DROP TABLE IF EXISTS ${table}`);
      // The keeper's storage as today's code made it: its SCHEMA, no version.
      sql.exec("CREATE TABLE IF NOT EXISTS kept_runs (run_id TEXT PRIMARY KEY, record TEXT NOT NULL)");
      sql.exec(`CREATE TABLE IF NOT EXISTS run_keys (
        caller TEXT NOT NULL, key TEXT NOT NULL, run_id TEXT NOT NULL, request_hash TEXT NOT NULL,
        created_at INTEGER NOT NULL, status TEXT NOT NULL, PRIMARY KEY (caller, key)
      ) WITHOUT ROWID`);
      sql.exec("CREATE INDEX IF NOT EXISTS run_keys_created ON run_keys (created_at)");
      sql.exec("CREATE INDEX IF NOT EXISTS run_keys_run ON run_keys (run_id)");
      sql.exec("INSERT INTO kept_runs VALUES ('run_kept', '{\"phase\":\"called\"}')");
      sql.exec("INSERT INTO run_keys VALUES ('sa:x', 'k1', 'run_kept', 'h', 1, 'running')");

      new Keeper(state, env, testDeps(), {} as OutcomePort);
      expect(rows(state.storage, "SELECT run_id, record FROM kept_runs")).toEqual([
        { run_id: "run_kept", record: '{"phase":"called"}' },
      ]);
      expect(rows(state.storage, "SELECT caller, key, run_id, status FROM run_keys")).toEqual([
        { caller: "sa:x", key: "k1", run_id: "run_kept", status: "running" },
      ]);
      expect(versionOf(state.storage)).toBe(0);
      sql.exec("DELETE FROM kept_runs");
      sql.exec("DELETE FROM run_keys");
    });
  });

  it("a lane (its version as text in lane_meta, beside its share and settings): deliveries and values kept as they were", async () => {
    const stub = laneObject(env, `lane-storage-${Date.now()}`);
    await runInDurableObject(stub, (_instance, state) => {
      const sql = state.storage.sql;
      for (const table of ["lane_deliveries", "lane_meta"]) sql.exec(`DROP TABLE IF EXISTS ${table}`);
      // The lane's storage as today's code made it.
      sql.exec(`CREATE TABLE IF NOT EXISTS lane_deliveries (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, message TEXT NOT NULL,
        due_at INTEGER NOT NULL, paused INTEGER NOT NULL DEFAULT 0, interruptions INTEGER NOT NULL DEFAULT 0,
        latest_at INTEGER, attempts INTEGER NOT NULL DEFAULT 0
      )`);
      sql.exec("CREATE INDEX IF NOT EXISTS lane_deliveries_retries ON lane_deliveries (paused, latest_at)");
      sql.exec("CREATE INDEX IF NOT EXISTS lane_deliveries_due ON lane_deliveries (paused, due_at)");
      sql.exec("CREATE TABLE IF NOT EXISTS lane_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
      sql.exec("INSERT INTO lane_meta VALUES ('schema', '2'), ('share', '3')");
      sql.exec(
        "INSERT INTO lane_deliveries (id, message, due_at, paused, interruptions, latest_at, attempts) VALUES ('whd_kept', '{}', 9999999999999, 1, 1, 9999999999999, 2)",
      );

      const lane = new Lane(state, env, testDeps());
      expect(lane.pending()).toEqual([{ id: "whd_kept", dueAt: 9999999999999, interruptions: 1 }]);
      expect(rows(state.storage, "SELECT paused, latest_at, attempts FROM lane_deliveries")).toEqual([
        { paused: 1, latest_at: 9999999999999, attempts: 2 },
      ]);
      // Text stays text: the lane compares its share as a string.
      expect(rows(state.storage, "SELECT key, value FROM lane_meta ORDER BY key")).toEqual([
        { key: "schema", value: "2" },
        { key: "share", value: "3" },
      ]);
      sql.exec("DELETE FROM lane_deliveries");
      sql.exec("DELETE FROM lane_meta WHERE key = 'share'");
    });
  });

  it("a ledger (version in meta, the schema made before the steps): its records kept, nothing applied again", async () => {
    const stub = ledgerOf(env, `proj_storage_${Date.now()}`);
    await runInDurableObject(stub, (_instance, state) => {
      state.storage.sql.exec(
        "INSERT INTO runs (run_id, app_name, mode, method, path, status_code, timed_out, hung_up, duration_ms, ttfb_ms, bytes_in, bytes_out, caller, webhook, request_id, created_at, ending) " +
          "VALUES ('run_0000000000kept', 'app', 'sync', 'GET', 'run', 200, 0, 0, 5, 1, 0, 0, 'sa:x', 0, 'req', 1, 'answered')",
      );
      const version = versionOf(state.storage);
      new Ledger(state.storage, Number.MAX_SAFE_INTEGER);
      expect(versionOf(state.storage)).toBe(version);
      expect(rows(state.storage, "SELECT run_id, ending FROM runs")).toEqual([
        { run_id: "run_0000000000kept", ending: "answered" },
      ]);
    });
  });
});
