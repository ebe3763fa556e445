import { and, desc, eq, getTableColumns, gt, inArray, isNotNull, isNull, lt, sql } from "drizzle-orm";
import type { Database } from "../../db/client";
import type { SQLiteColumn as Column } from "drizzle-orm/sqlite-core";
import { type AsyncRun, type AsyncRunStatus, asyncRuns, webhookDeliveries } from "../../db/schema";
import { driverValues, fromDriver, prepared } from "../../db/statement-group";
import { pendingInsert, type PendingRow } from "../../webhooks/store";

/**
 * Async runs in D1's `async_runs`: where they were kept before they moved to their keepers
 * (kept-runs.ts, the same rules over the keeper's SQLite). What D1 still holds from before the move is
 * read, ended and purged here until its retention has taken it (rows.ts falls back to it).
 *
 * Every change of an async run's state is one conditional write on its status, so two writers (the
 * consumer's claim and a cancel, two copies of one queue message, the consumer and the sweeper) can
 * never both win: `queued → running` (claim), `queued → cancelled` (cancel), `running → succeeded |
 * failed` (finish, by the claimant only), `running → failed` (interrupted), `queued → failed` (expired).
 *
 * Each of these writes returns the run's `followed` flag: the writer tells the run's followers
 * (`followers.ts`) only when a stream follows it, so a run nobody follows costs its owner nothing more.
 * A stream sets the flag (`followRun`) in one write that also reads the state, so the store orders the two: a
 * change either comes before that write (and the stream reads it) or after it (and the owner tells).
 */

export type NewAsyncRun = typeof asyncRuns.$inferInsert;

/**
 * What an ended run forgets of its request: the body, the forwarded headers (an app's own `X-Api-Key`
 * among them), the admitted run and the query of its app URL. Nothing reads them once the run cannot start any more;
 * the state, result and error stay for the retention.
 */
const FORGET_REQUEST = {
  requestBody: null,
  requestHeaders: "[]",
  admitted: null,
  appUrl: sql`CASE WHEN instr(${asyncRuns.appUrl}, '?') > 0 THEN substr(${asyncRuns.appUrl}, 1, instr(${asyncRuns.appUrl}, '?') - 1) ELSE ${asyncRuns.appUrl} END`,
};

/**
 * The INSERT of a run, every column bound, rendered once per isolate (`prepared`): it runs for every
 * async run as it is accepted, so drizzle's query building stays off that path.
 */
const insertStatement = prepared<Record<string, unknown>>(() => {
  const columns = Object.entries(getTableColumns(asyncRuns));
  return sql`INSERT INTO ${asyncRuns} (${sql.join(
    columns.map(([, column]) => sql.identifier(column.name)),
    sql`, `,
  )}) VALUES (${sql.join(
    columns.map(([key]) => sql.placeholder(key)),
    sql`, `,
  )}) ON CONFLICT DO NOTHING RETURNING ${sql.identifier(asyncRuns.id.name)}`;
});

/** Inserts a queued run; `false` when its `Idempotency-Key` is taken in the project by its caller (the row was not written). */
export async function insertRun(db: Database, run: NewAsyncRun): Promise<boolean> {
  const { results } = await insertStatement(db, driverValues(asyncRuns, run)).all();
  return results.length === 1;
}

export async function runByKey(
  db: Database,
  projectId: string,
  caller: string,
  key: string,
): Promise<AsyncRun | undefined> {
  const [row] = await db
    .select()
    .from(asyncRuns)
    .where(and(eq(asyncRuns.projectId, projectId), eq(asyncRuns.caller, caller), eq(asyncRuns.idempotencyKey, key)))
    .limit(1);
  return row;
}

/** Frees a key whose 24 hours are over, so a new run may take it. */
export async function releaseKey(db: Database, runId: string, createdBefore: Date): Promise<void> {
  await db
    .update(asyncRuns)
    .set({ idempotencyKey: null })
    .where(and(eq(asyncRuns.id, runId), lt(asyncRuns.createdAt, createdBefore)));
}

export async function runById(db: Database, runId: string): Promise<AsyncRun | undefined> {
  const [row] = await db.select().from(asyncRuns).where(eq(asyncRuns.id, runId)).limit(1);
  return row;
}

/**
 * The columns of a run's state: who may read it, where it is in its life, how it ended. What a status
 * stream reads of its run (at its start, and again each minute it waits): never the stored request (up
 * to `INLINE_PAYLOAD_MAX_BYTES` of body, and its headers) nor the result, a few hundred bytes whatever
 * the run carries. The result is read once, for the end (`storedResult`).
 */
export const STATE = [
  "id",
  "projectId",
  "appName",
  "caller",
  "status",
  "mode",
  "createdAt",
  "startedAt",
  "handedOverAt",
  "deadlineAt",
  "finishedAt",
  "resultStatus",
  "errorCode",
  "errorMessage",
] as const;
const allColumns = getTableColumns(asyncRuns);
const stateColumns = Object.fromEntries(STATE.map((name) => [name, allColumns[name]])) as Pick<
  typeof allColumns,
  (typeof STATE)[number]
>;

/** A run's state without its payloads (`stateColumns`). */
export type RunState = Pick<AsyncRun, keyof typeof stateColumns>;

/** The run's state (`stateColumns`), or `undefined` when there is no such run. */
export async function runStateById(db: Database, runId: string): Promise<RunState | undefined> {
  const [row] = await db.select(stateColumns).from(asyncRuns).where(eq(asyncRuns.id, runId)).limit(1);
  return row;
}

/** The run's stored result (inline, or whether it is in R2), or `undefined` when there is no such run. */
export async function storedResult(
  db: Database,
  runId: string,
): Promise<Pick<AsyncRun, "result" | "resultInR2"> | undefined> {
  const [row] = await db
    .select({ result: asyncRuns.result, resultInR2: asyncRuns.resultInR2 })
    .from(asyncRuns)
    .where(eq(asyncRuns.id, runId))
    .limit(1);
  return row;
}

/** Which of a project's runs a page lists: a caller's own (or all, `undefined`), in one state, ids below `after`. */
export interface RunFilter {
  callers: string[] | undefined;
  status: AsyncRunStatus | undefined;
  after: string | undefined;
  limit: number;
}

/** A run as a list shows it: every column but the payloads (a page of runs must not read their results). */
const {
  result: _result,
  requestBody: _body,
  requestHeaders: _headers,
  webhookSecret: _secret,
  admitted: _admitted,
  ...listedColumns
} = getTableColumns(asyncRuns);
export type ListedRun = Omit<AsyncRun, "result" | "requestBody" | "requestHeaders" | "webhookSecret" | "admitted">;

/** Up to `limit` runs of `projectId` that `filter` lets through, newest first (ids sort by time). */
export async function listRuns(db: Database, projectId: string, filter: RunFilter): Promise<ListedRun[]> {
  const { callers, status, after, limit } = filter;
  return db
    .select(listedColumns)
    .from(asyncRuns)
    .where(
      and(
        eq(asyncRuns.projectId, projectId),
        callers === undefined ? undefined : inArray(asyncRuns.caller, callers),
        status ? eq(asyncRuns.status, status) : undefined,
        after === undefined ? undefined : lt(asyncRuns.id, after),
      ),
    )
    .orderBy(desc(asyncRuns.id))
    .limit(limit);
}

export const deleteRun = (db: Database, runId: string) => db.delete(asyncRuns).where(eq(asyncRuns.id, runId));

/** The claim, rendered once per isolate (`prepared`): it runs for every async run its consumer takes. */
const claimStatement = prepared<{ id: string; now: number; messageId: string }>(
  () => sql`UPDATE ${asyncRuns} SET ${sql.identifier(asyncRuns.status.name)} = 'running',
    ${sql.identifier(asyncRuns.startedAt.name)} = ${sql.placeholder("now")},
    ${sql.identifier(asyncRuns.claimedBy.name)} = ${sql.placeholder("messageId")}
    WHERE ${asyncRuns.id} = ${sql.placeholder("id")} AND ${asyncRuns.status} = 'queued'
      AND (${asyncRuns.deadlineAt} IS NULL OR ${asyncRuns.deadlineAt} > ${sql.placeholder("now")})
    RETURNING *`,
);

/**
 * `queued → running` for the queue message `messageId`; the claimed row, or `undefined` when the run was
 * not queued, or its deadline (`Cancel-After`) has passed: such a run is never started.
 */
export async function claimRun(
  db: Database,
  runId: string,
  messageId: string,
  now: Date,
): Promise<AsyncRun | undefined> {
  const { results } = await claimStatement(db, { id: runId, now: now.getTime(), messageId }).all();
  return results[0] ? fromDriver(asyncRuns, results[0]) : undefined;
}

/** `queued → cancelled`; the cancelled row, or `undefined` when the run was not queued (or is not this app's). */
export async function cancelRun(
  db: Database,
  projectId: string,
  appName: string,
  runId: string,
  now: Date,
): Promise<AsyncRun | undefined> {
  const [row] = await db
    .update(asyncRuns)
    .set({ status: "cancelled", finishedAt: now, ...FORGET_REQUEST, webhookSecret: null })
    .where(
      and(
        eq(asyncRuns.id, runId),
        eq(asyncRuns.projectId, projectId),
        eq(asyncRuns.appName, appName),
        eq(asyncRuns.status, "queued"),
      ),
    )
    .returning();
  return row;
}

/** What a finished run keeps: its state, answer and error. The request is forgotten; the sealed secret waits until the delivery has it. */
export interface StoredEnding {
  status: Extract<AsyncRunStatus, "succeeded" | "failed">;
  resultStatus: number;
  resultType: string;
  resultBytes: number;
  result: string | null;
  resultInR2: boolean;
  errorCode: string | null;
  errorMessage: string | null;
  finishedAt: Date;
}

/** What a write that ended a run answers: whether a stream follows it. */
export interface Ended {
  followed: boolean;
  /**
   * With a `ResultDelivery`, whether its `pending` record was written (`false`: D1 refused it, and the
   * delivery's first claim writes it from its message; a delivery that never reaches a claim is then
   * settled by writing the record, `settleUnsent`).
   */
  recorded?: boolean;
}

/**
 * The delivery of a run's result, made when the run ends: `deliveryId` is what the run records (`none`
 * when there will be none: its secret could not be read), `row` the delivery's `pending` row, written
 * in the same D1 batch that ends the run (webhooks/enqueue.ts `preparePending`).
 */
export interface ResultDelivery {
  deliveryId: string;
  row: PendingRow | null;
}

const r = asyncRuns;
const name = (column: Column) => sql.identifier(column.name);
const placeholder = (key: string, column: Column) => sql.param(sql.placeholder(key), column);
/** Where each part of a `StoredEnding` is kept: a field added to `StoredEnding` without a column here does not compile. */
const endingColumns = {
  status: r.status,
  resultStatus: r.resultStatus,
  resultType: r.resultType,
  resultBytes: r.resultBytes,
  result: r.result,
  resultInR2: r.resultInR2,
  errorCode: r.errorCode,
  errorMessage: r.errorMessage,
  finishedAt: r.finishedAt,
} satisfies Record<keyof StoredEnding, Column>;

/**
 * The end of a run, rendered once per isolate (`prepared`): its ending, the request forgotten, and the
 * delivery when there is one (its id recorded, the sealed secret forgotten), in one
 * conditional write that answers whether a stream follows the run.
 */
const endStatement = prepared<Record<keyof StoredEnding | "id" | "from" | "claimedBy" | "deliveryId", unknown>>(
  () => sql`UPDATE ${r} SET ${sql.join(
    Object.entries(endingColumns).map(([key, column]) => sql`${name(column)} = ${placeholder(key, column)}`),
    sql`, `,
  )},
    ${name(r.requestBody)} = NULL, ${name(r.requestHeaders)} = '[]', ${name(r.admitted)} = NULL,
    ${name(r.appUrl)} = ${FORGET_REQUEST.appUrl},
    ${name(r.deliveryId)} = coalesce(${placeholder("deliveryId", r.deliveryId)}, ${r.deliveryId}),
    ${name(r.webhookSecret)} = CASE WHEN ${placeholder("deliveryId", r.deliveryId)} IS NULL THEN ${r.webhookSecret} ELSE NULL END
    WHERE ${r.id} = ${placeholder("id", r.id)} AND ${r.status} = ${placeholder("from", r.status)}
      AND (${placeholder("claimedBy", r.claimedBy)} IS NULL OR ${r.claimedBy} = ${placeholder("claimedBy", r.claimedBy)})
    RETURNING ${name(r.followed)}`,
);

/** The delivery's `pending` row, written only when the run records its id: only when the end in the same batch happened. */
const deliveryStatement = pendingInsert(
  () =>
    sql`SELECT 1 FROM ${r} WHERE ${r.id} = ${sql.placeholder("runId")} AND ${r.deliveryId} = ${sql.placeholder("id")}`,
);

/**
 * Ends a run that is in state `from` (and, when given, claimed by `claimedBy`). `Ended` when this write
 * ended it; `undefined` when someone else already had (the caller then must not give the webhook anything).
 *
 * With `delivery`, the run records its delivery in the same write, and the delivery's `pending` row
 * goes with it in one D1 batch (one round trip, one transaction): written only if the end was, so a
 * run ended by someone else gets no second delivery. A run's end, its delivery's record and the note
 * of its id were three round trips.
 */
export async function endRun(
  db: Database,
  runId: string,
  from: "queued" | "running",
  claimedBy: string | null,
  ending: StoredEnding,
  delivery?: ResultDelivery,
): Promise<Ended | undefined> {
  const end = endStatement(db, {
    ...ending,
    id: runId,
    from,
    claimedBy,
    deliveryId: delivery?.deliveryId ?? null,
  });
  const [ended] = delivery?.row
    ? await db.$client.batch<{ followed: number }>([end, deliveryStatement(db, delivery.row)])
    : [await end.all<{ followed: number }>()];
  const [row] = ended!.results;
  return row ? { followed: Boolean(row.followed) } : undefined;
}

/**
 * Marks the run followed and reads its state, in one write (see the top of this file for why one). The
 * run's state as it is now (`stateColumns`: not its payloads), or `undefined` when it is gone (purged).
 */
export async function followRunRow(db: Database, runId: string): Promise<RunState | undefined> {
  const [row] = await db
    .update(asyncRuns)
    .set({ followed: true })
    .where(eq(asyncRuns.id, runId))
    .returning(stateColumns);
  return row;
}

/** The run's result was handed to the webhook pipeline as `deliveryId` (`none`: it will not be); the secret is forgotten. */
export async function deliveryNoted(db: Database, runId: string, deliveryId: string): Promise<void> {
  await db.update(asyncRuns).set({ deliveryId, webhookSecret: null }).where(eq(asyncRuns.id, runId));
}

/** Finished runs with a webhook whose result never reached its delivery, finished before `before`. */
export async function undeliveredRuns(db: Database, before: Date, limit: number): Promise<AsyncRun[]> {
  return db
    .select()
    .from(asyncRuns)
    .where(
      and(
        isNotNull(asyncRuns.webhookEndpoint),
        isNull(asyncRuns.deliveryId),
        inArray(asyncRuns.status, ["succeeded", "failed"]),
        lt(asyncRuns.finishedAt, before),
      ),
    )
    .orderBy(asyncRuns.finishedAt)
    .limit(limit);
}

/**
 * Finished runs whose delivery was recorded with their end (`endRun` with a `ResultDelivery`) and has had no
 * attempt, recorded between `since` and `before`: the consumer that ended them may have died before
 * handing it on. Oldest first; one older than `since` is left to the webhooks' sweeper, which settles it.
 */
export async function unsentDeliveries(db: Database, since: Date, before: Date, limit: number) {
  const d = webhookDeliveries;
  return db
    .select({ run: asyncRuns, delivery: d })
    .from(d)
    .innerJoin(asyncRuns, and(eq(asyncRuns.id, d.runId), eq(asyncRuns.deliveryId, d.id)))
    .where(and(eq(d.status, "pending"), eq(d.attemptCount, 0), gt(d.updatedAt, since), lt(d.updatedAt, before)))
    .orderBy(d.updatedAt)
    .limit(limit);
}

/**
 * The delivery recorded for the run's result (the delivery log's record), if any: `deliveryId` when the
 * run has noted one, else the first made for the run (never a resend of it).
 */
export async function recordedDelivery(
  db: Database,
  projectId: string,
  runId: string,
  deliveryId?: string | null,
): Promise<typeof webhookDeliveries.$inferSelect | undefined> {
  const d = webhookDeliveries;
  const [row] = await db
    .select()
    .from(d)
    .where(
      deliveryId
        ? and(eq(d.projectId, projectId), eq(d.id, deliveryId))
        : and(eq(d.projectId, projectId), eq(d.runId, runId), isNull(d.resentFrom)),
    )
    .orderBy(d.createdAt)
    .limit(1);
  return row;
}

/** Runs in `status` since before `before` (by start for running, by creation for queued), oldest first. */
export async function staleRuns(
  db: Database,
  status: "queued" | "running",
  before: Date,
  limit: number,
): Promise<AsyncRun[]> {
  const at = status === "running" ? asyncRuns.startedAt : asyncRuns.createdAt;
  return db
    .select()
    .from(asyncRuns)
    .where(and(eq(asyncRuns.status, status), lt(at, before)))
    .orderBy(at)
    .limit(limit);
}

/** Finished runs whose retention is over: their ids and which of them have payloads in R2. */
/** Finished runs before `finishedBefore`, oldest first (`async_runs_finished` holds exactly these). */
export async function expiredRuns(db: Database, finishedBefore: Date, limit: number) {
  return db
    .select({ id: asyncRuns.id, requestInR2: asyncRuns.requestInR2, resultInR2: asyncRuns.resultInR2 })
    .from(asyncRuns)
    .where(and(isNotNull(asyncRuns.finishedAt), lt(asyncRuns.finishedAt, finishedBefore)))
    .orderBy(asyncRuns.finishedAt)
    .limit(limit);
}

/** Deletes these runs in one round trip (a batch: one transaction), a statement per 100 ids. */
export async function deleteRuns(db: Database, ids: string[]): Promise<void> {
  // D1 binds at most 100 parameters per statement.
  const statements = [];
  for (let i = 0; i < ids.length; i += 100)
    statements.push(db.delete(asyncRuns).where(inArray(asyncRuns.id, ids.slice(i, i + 100))));
  const [first, ...rest] = statements;
  if (first) await db.batch([first, ...rest]);
}

/**
 * Frees up to `limit` `Idempotency-Key`s older than `before`, oldest first (Stripe's rule: a key holds
 * for 24 hours); how many it freed. `async_runs_keyed` holds exactly the keyed runs, by age.
 */
export async function releaseKeys(db: Database, before: Date, limit: number): Promise<number> {
  const keyed = db
    .select({ id: asyncRuns.id })
    .from(asyncRuns)
    .where(and(isNotNull(asyncRuns.idempotencyKey), lt(asyncRuns.createdAt, before)))
    .orderBy(asyncRuns.createdAt)
    .limit(limit);
  const freed = await db
    .update(asyncRuns)
    .set({ idempotencyKey: null })
    .where(sql`${asyncRuns.id} IN ${keyed}`)
    .returning({ id: asyncRuns.id });
  return freed.length;
}
