import { getTableColumns } from "drizzle-orm";
import { type AsyncRun, asyncRuns } from "../../db/schema";
import { driverValues, fromDriver } from "../../db/statement-group";
import {
  type Ended,
  type ListedRun,
  type NewAsyncRun,
  type RunFilter,
  type RunState,
  STATE,
  type StoredEnding,
} from "./store";

/**
 * A project's async runs (and its waited runs handed over) in the SQLite storage of their keeper
 * (src/runs/wait/keeper.ts), one object per project and shard of the run id: the rows D1's
 * `async_runs` held for every project (docs/architecture.md, "The sixth wave's moves"). The same
 * columns and the same rules (store.ts): every change of state is one conditional write on the status,
 * which answers whether a stream follows the run; an ended run forgets its request. Synchronous: each
 * statement is a local SQLite call of the object, committed with the others of its turn.
 *
 * Bounded (issue 41 Must 3): a run's row is at most 2 × `INLINE_PAYLOAD_MAX_BYTES` of payload and a few
 * KB more; retention takes finished runs after `RUN_RETENTION_MS` (the keeper's alarm, in slices);
 * past `bytesMax` of storage the keeper takes no new run (`insert` answers `full`) until the purge has
 * made room, so a project that outruns its retention is told (503), never silently dropped.
 */

/**
 * The table and its indexes: the columns of D1's `async_runs`, by their SQL names but one: the app's URL
 * is `app_url` here (D1's column kept an older name, which `runOf` maps).
 */
export const KEPT_RUNS_SCHEMA = [
  `CREATE TABLE IF NOT EXISTS async_runs (
    id TEXT PRIMARY KEY, project_id TEXT NOT NULL, app_name TEXT NOT NULL, status TEXT NOT NULL,
    method TEXT NOT NULL, app_url TEXT NOT NULL, app_path TEXT, request_headers TEXT NOT NULL,
    request_body TEXT, request_in_r2 INTEGER NOT NULL DEFAULT 0,
    request_body_encoding TEXT NOT NULL DEFAULT 'utf8', request_id TEXT NOT NULL, idempotency_key TEXT,
    request_hash TEXT NOT NULL, webhook_endpoint TEXT, webhook_secret TEXT, delivery_id TEXT,
    claimed_by TEXT, result_status INTEGER, result_type TEXT, result_bytes INTEGER, result TEXT,
    result_in_r2 INTEGER NOT NULL DEFAULT 0, error_code TEXT, error_message TEXT,
    caller TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, started_at INTEGER, finished_at INTEGER,
    mode TEXT NOT NULL DEFAULT 'async', handed_over_at INTEGER, deadline_at INTEGER,
    followed INTEGER NOT NULL DEFAULT 0, admitted TEXT
  )`,
  // A caller's key names one run (its 24 hours are freed by `releaseKeys`).
  `CREATE UNIQUE INDEX IF NOT EXISTS async_runs_key ON async_runs (caller, idempotency_key)
    WHERE idempotency_key IS NOT NULL`,
  // The sweep's: runs left queued or running too long, finished runs past retention, keys past 24 hours,
  // results never handed to their delivery.
  `CREATE INDEX IF NOT EXISTS async_runs_open ON async_runs (status, created_at)
    WHERE status IN ('queued', 'running')`,
  "CREATE INDEX IF NOT EXISTS async_runs_finished ON async_runs (finished_at) WHERE finished_at IS NOT NULL",
  "CREATE INDEX IF NOT EXISTS async_runs_keyed ON async_runs (created_at) WHERE idempotency_key IS NOT NULL",
  `CREATE INDEX IF NOT EXISTS async_runs_undelivered ON async_runs (finished_at)
    WHERE webhook_endpoint IS NOT NULL AND delivery_id IS NULL AND status IN ('succeeded', 'failed')`,
  // A list in one state, newest first.
  "CREATE INDEX IF NOT EXISTS async_runs_status ON async_runs (status, id)",
];

const columns = getTableColumns(asyncRuns);
/** Field name → SQL column name. */
const column = {
  ...Object.fromEntries(Object.entries(columns).map(([field, c]) => [field, c.name])),
  appUrl: "app_url",
} as Record<keyof AsyncRun, string>;
const FIELDS = Object.keys(columns) as (keyof AsyncRun)[];
const INSERT = `INSERT INTO async_runs (${FIELDS.map((f) => column[f]).join(", ")}) VALUES (${FIELDS.map(() => "?").join(", ")}) ON CONFLICT DO NOTHING RETURNING id`;

/** The state's columns (store.ts `STATE`): what a stream reads, never the payloads. */
const STATE_COLUMNS = STATE.map((f) => column[f]).join(", ");
const PAYLOADS = new Set<keyof AsyncRun>(["result", "requestBody", "requestHeaders", "webhookSecret", "admitted"]);
const LISTED = FIELDS.filter((f) => !PAYLOADS.has(f))
  .map((f) => column[f])
  .join(", ");

/** What an ended run forgets of its request (store.ts `FORGET_REQUEST`): body, headers, admitted run, its URL's query. */
const FORGET_REQUEST = `request_body = NULL, request_headers = '[]', admitted = NULL,
  app_url = CASE WHEN instr(app_url, '?') > 0 THEN substr(app_url, 1, instr(app_url, '?') - 1) ELSE app_url END`;

/** A row as SQLite returns it, as drizzle's select of D1's `async_runs` would map it (`app_url` under D1's name). */
const runOf = (raw: Record<string, SqlStorageValue>) =>
  fromDriver(asyncRuns, "app_url" in raw ? { ...raw, [columns.appUrl.name]: raw.app_url } : raw);

/** The runs a keeper keeps, over its SQLite storage. */
/** How long each kind of row may wait before the sweep has work for it (`KeptRuns.nextDue`). */
export interface SweepAfter {
  queuedMs: number;
  runningMs: number;
  undeliveredMs: number;
  retentionMs: number;
  keyMs: number;
}

type DueTerms = Record<"queued" | "running" | "undelivered" | "finished" | "keyed", number | null>;

function earliestDue(terms: DueTerms, after: SweepAfter): number | null {
  const due = [
    terms.queued === null ? null : terms.queued + after.queuedMs,
    terms.running === null ? null : terms.running + after.runningMs,
    terms.undelivered === null ? null : terms.undelivered + after.undeliveredMs,
    terms.finished === null ? null : terms.finished + after.retentionMs,
    terms.keyed === null ? null : terms.keyed + after.keyMs,
  ].filter((at): at is number => at !== null);
  return due.length === 0 ? null : Math.min(...due);
}

/** `KeptRuns.nextDue` of one run as its row stands, the same five terms: what an event on that run adds. */
export function dueOfRun(
  run: Pick<
    NewAsyncRun,
    "status" | "createdAt" | "startedAt" | "finishedAt" | "webhookEndpoint" | "deliveryId" | "idempotencyKey"
  >,
  after: SweepAfter,
): number | null {
  // A column left out of an insert is NULL, as in SQL.
  const set = <T>(value: T | null | undefined): value is T => value !== null && value !== undefined;
  const ms = (at: Date | null | undefined) => (set(at) ? at.getTime() : null);
  return earliestDue(
    {
      queued: run.status === "queued" ? ms(run.createdAt) : null,
      running: run.status === "running" ? ms(run.startedAt) : null,
      undelivered:
        set(run.webhookEndpoint) && !set(run.deliveryId) && (run.status === "succeeded" || run.status === "failed")
          ? ms(run.finishedAt)
          : null,
      finished: ms(run.finishedAt),
      keyed: set(run.idempotencyKey) ? ms(run.createdAt) : null,
    },
    after,
  );
}

export class KeptRuns {
  constructor(
    private readonly sql: SqlStorage,
    /** Storage past which no new run is taken (tests lower it). */
    public bytesMax: number,
  ) {}

  /** Writes a queued (or handed-over) run: `taken`, `key_taken` when its caller's key names another, `full` past the bound. */
  insert(run: NewAsyncRun): "taken" | "key_taken" | "full" {
    // A key's run is answered whatever the bound: a replay writes nothing.
    if (run.idempotencyKey && this.byKey(run.caller ?? "", run.idempotencyKey)) return "key_taken";
    // The bound refuses new work, never the record of work done: a run that has ended already (a waited
    // run its keeper lost mid-call, whose app was called) is written whatever the bytes.
    if (!run.finishedAt && this.sql.databaseSize >= this.bytesMax) return "full";
    const values = driverValues(asyncRuns, run);
    const rows = this.sql.exec(INSERT, ...FIELDS.map((f) => values[f] as SqlStorageValue)).toArray();
    return rows.length === 1 ? "taken" : "key_taken";
  }

  byKey(caller: string, key: string): AsyncRun | undefined {
    return this.#one("SELECT * FROM async_runs WHERE caller = ? AND idempotency_key = ?", caller, key);
  }

  releaseKey(runId: string, createdBefore: Date): void {
    this.sql.exec(
      "UPDATE async_runs SET idempotency_key = NULL WHERE id = ? AND created_at < ?",
      runId,
      createdBefore.getTime(),
    );
  }

  byId(runId: string): AsyncRun | undefined {
    return this.#one("SELECT * FROM async_runs WHERE id = ?", runId);
  }

  stateById(runId: string): RunState | undefined {
    return this.#one(`SELECT ${STATE_COLUMNS} FROM async_runs WHERE id = ?`, runId);
  }

  storedResult(runId: string): Pick<AsyncRun, "result" | "resultInR2"> | undefined {
    const run = this.#one("SELECT result, result_in_r2 FROM async_runs WHERE id = ?", runId);
    return run && { result: run.result, resultInR2: run.resultInR2 };
  }

  remove(runId: string): void {
    this.sql.exec("DELETE FROM async_runs WHERE id = ?", runId);
  }

  /** `queued → running` for queue message `messageId`, unless its deadline has passed (store.ts `claimRun`). */
  claim(runId: string, messageId: string, now: Date): AsyncRun | undefined {
    return this.#one(
      `UPDATE async_runs SET status = 'running', started_at = ?, claimed_by = ?
        WHERE id = ? AND status = 'queued' AND (deadline_at IS NULL OR deadline_at > ?) RETURNING *`,
      now.getTime(),
      messageId,
      runId,
      now.getTime(),
    );
  }

  /** `queued → cancelled` of a run of `appName`; the request and sealed secret are forgotten. */
  cancel(appName: string, runId: string, now: Date): AsyncRun | undefined {
    return this.#one(
      `UPDATE async_runs SET status = 'cancelled', finished_at = ?, ${FORGET_REQUEST}, webhook_secret = NULL
        WHERE id = ? AND app_name = ? AND status = 'queued' RETURNING *`,
      now.getTime(),
      runId,
      appName,
    );
  }

  /**
   * Ends a run in state `from` (claimed by `claimedBy` when given) with `ending`; the request is
   * forgotten. The sealed secret stays until `deliveryNoted` (its delivery has it).
   */
  end(runId: string, from: "queued" | "running", claimedBy: string | null, ending: StoredEnding): Ended | undefined {
    const row = this.sql
      .exec<{ followed: number }>(
        `UPDATE async_runs SET status = ?, result_status = ?, result_type = ?, result_bytes = ?, result = ?,
          result_in_r2 = ?, error_code = ?, error_message = ?, finished_at = ?, ${FORGET_REQUEST}
          WHERE id = ? AND status = ? AND (? IS NULL OR claimed_by = ?) RETURNING followed`,
        ending.status,
        ending.resultStatus,
        ending.resultType,
        ending.resultBytes,
        ending.result,
        ending.resultInR2 ? 1 : 0,
        ending.errorCode,
        ending.errorMessage,
        ending.finishedAt.getTime(),
        runId,
        from,
        claimedBy,
        claimedBy,
      )
      .toArray()[0];
    return row ? { followed: Boolean(row.followed) } : undefined;
  }

  /** Marks the run followed and reads its state, in one write. */
  follow(runId: string): RunState | undefined {
    return this.#one(`UPDATE async_runs SET followed = 1 WHERE id = ? RETURNING ${STATE_COLUMNS}`, runId);
  }

  /** The run's result was handed to its delivery `deliveryId` (`none`: it will not be); its secret is forgotten. `false`: no such run. */
  deliveryNoted(runId: string, deliveryId: string): boolean {
    return (
      this.sql
        .exec(
          "UPDATE async_runs SET delivery_id = ?, webhook_secret = NULL WHERE id = ? RETURNING id",
          deliveryId,
          runId,
        )
        .toArray().length === 1
    );
  }

  /** Up to `filter.limit` runs, newest first (ids sort by time). */
  page({ callers, status, after, limit }: RunFilter): ListedRun[] {
    const where: string[] = [];
    const values: SqlStorageValue[] = [];
    if (callers !== undefined) {
      if (callers.length === 0) return [];
      where.push(`caller IN (${callers.map(() => "?").join(", ")})`);
      values.push(...callers);
    }
    if (status !== undefined) {
      where.push("status = ?");
      values.push(status);
    }
    if (after !== undefined) {
      where.push("id < ?");
      values.push(after);
    }
    const clause = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    return this.sql
      .exec(`SELECT ${LISTED} FROM async_runs ${clause} ORDER BY id DESC LIMIT ?`, ...values, limit)
      .toArray()
      .map((raw) => runOf(raw) as ListedRun);
  }

  /** Runs in `status` since before `before` (by start for running, by creation for queued), oldest first. */
  stale(status: "queued" | "running", before: Date, limit: number): AsyncRun[] {
    const at = status === "running" ? "started_at" : "created_at";
    return this.#all(
      `SELECT * FROM async_runs WHERE status = ? AND ${at} < ? ORDER BY ${at} LIMIT ?`,
      status,
      before.getTime(),
      limit,
    );
  }

  /** Finished runs with a webhook whose result never reached its delivery, finished before `before`. */
  undelivered(before: Date, limit: number): AsyncRun[] {
    return this.#all(
      `SELECT * FROM async_runs WHERE webhook_endpoint IS NOT NULL AND delivery_id IS NULL
        AND status IN ('succeeded', 'failed') AND finished_at < ? ORDER BY finished_at LIMIT ?`,
      before.getTime(),
      limit,
    );
  }

  /** Finished runs before `finishedBefore`, oldest first: ids, and which payloads are in R2. */
  expired(finishedBefore: Date, limit: number): Pick<AsyncRun, "id" | "requestInR2" | "resultInR2">[] {
    return this.#all(
      `SELECT id, request_in_r2, result_in_r2 FROM async_runs
        WHERE finished_at IS NOT NULL AND finished_at < ? ORDER BY finished_at LIMIT ?`,
      finishedBefore.getTime(),
      limit,
    ).map(({ id, requestInR2, resultInR2 }) => ({ id, requestInR2, resultInR2 }));
  }

  removeAll(ids: string[]): void {
    // SQLite in a Durable Object binds at most 100 parameters per statement.
    for (let i = 0; i < ids.length; i += 100) {
      const slice = ids.slice(i, i + 100);
      this.sql.exec(`DELETE FROM async_runs WHERE id IN (${slice.map(() => "?").join(", ")})`, ...slice);
    }
  }

  /** Frees up to `limit` keys older than `before`, oldest first; how many. */
  releaseKeys(before: Date, limit: number): number {
    return this.sql
      .exec(
        `UPDATE async_runs SET idempotency_key = NULL WHERE id IN (SELECT id FROM async_runs
          WHERE idempotency_key IS NOT NULL AND created_at < ? ORDER BY created_at LIMIT ?) RETURNING id`,
        before.getTime(),
        limit,
      )
      .toArray().length;
  }

  /**
   * When the sweep next has something to do, given how long each kind of row may wait (`after`): a run
   * left queued or running, a result not handed to its delivery, a finished run past retention, a key
   * past its 24 hours. `null`: nothing ever (no rows).
   */
  nextDue(after: SweepAfter): number | null {
    const row = this.sql
      .exec<DueTerms>(
        `SELECT
          (SELECT min(created_at) FROM async_runs WHERE status = 'queued') AS queued,
          (SELECT min(started_at) FROM async_runs WHERE status = 'running') AS running,
          (SELECT min(finished_at) FROM async_runs WHERE webhook_endpoint IS NOT NULL AND delivery_id IS NULL
            AND status IN ('succeeded', 'failed')) AS undelivered,
          (SELECT min(finished_at) FROM async_runs WHERE finished_at IS NOT NULL) AS finished,
          (SELECT min(created_at) FROM async_runs WHERE idempotency_key IS NOT NULL) AS keyed`,
      )
      .one();
    return earliestDue(row, after);
  }

  #all(query: string, ...values: SqlStorageValue[]): AsyncRun[] {
    return this.sql
      .exec(query, ...values)
      .toArray()
      .map((raw) => runOf(raw));
  }

  #one(query: string, ...values: SqlStorageValue[]): AsyncRun | undefined {
    return this.#all(query, ...values)[0];
  }
}
