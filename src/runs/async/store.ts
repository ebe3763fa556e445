import { and, eq, gt, inArray, isNotNull, isNull, lt, or, sql } from "drizzle-orm";
import type { Database } from "../../db/client";
import { type AsyncRun, type AsyncRunStatus, asyncRuns, webhookDeliveries } from "../../db/schema";

/**
 * Every change of an async run's state is one conditional write on its status, so two writers (the
 * consumer's claim and a cancel, two copies of one queue message, the consumer and the sweeper) can
 * never both win: `queued → running` (claim), `queued → cancelled` (cancel), `running → succeeded |
 * failed` (finish, by the claimant only), `running → failed` (interrupted), `queued → failed` (expired).
 *
 * Each of these writes returns the run's `followed` flag: the writer tells the run's followers
 * (`followers.ts`) only when a stream follows it, so a run nobody follows costs its owner nothing more.
 * A stream sets the flag (`followRun`) in one write that also reads the state, so D1 orders the two: a
 * change either comes before that write (and the stream reads it) or after it (and the owner tells).
 */

export type NewAsyncRun = typeof asyncRuns.$inferInsert;

/**
 * What an ended run forgets of its request: the body, the forwarded headers (an app's own `X-Api-Key`
 * among them) and the query of its target. Nothing reads them once the run cannot start any more;
 * the state, result and error stay for the retention.
 */
const FORGET_REQUEST = {
  requestBody: null,
  requestHeaders: "[]",
  target: sql`CASE WHEN instr(${asyncRuns.target}, '?') > 0 THEN substr(${asyncRuns.target}, 1, instr(${asyncRuns.target}, '?') - 1) ELSE ${asyncRuns.target} END`,
};

/** Inserts a queued run; `false` when its `Idempotency-Key` is taken in the project by its caller (the row was not written). */
export async function insertRun(db: Database, run: NewAsyncRun): Promise<boolean> {
  const rows = await db.insert(asyncRuns).values(run).onConflictDoNothing().returning({ id: asyncRuns.id });
  return rows.length === 1;
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

export const deleteRun = (db: Database, runId: string) => db.delete(asyncRuns).where(eq(asyncRuns.id, runId));

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
  const [row] = await db
    .update(asyncRuns)
    .set({ status: "running", startedAt: now, claimedBy: messageId })
    .where(
      and(
        eq(asyncRuns.id, runId),
        eq(asyncRuns.status, "queued"),
        or(isNull(asyncRuns.deadlineAt), gt(asyncRuns.deadlineAt, now)),
      ),
    )
    .returning();
  return row;
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

/** What a finished run keeps: its state, answer and error. The request is forgotten; the sealed secret waits for the hand-off. */
export interface Ending {
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
}

/**
 * Ends a run that is in state `from` (and, when given, claimed by `claimedBy`). `Ended` when this write
 * ended it; `undefined` when someone else already had (the caller then must not deliver anything).
 */
export async function endRun(
  db: Database,
  runId: string,
  from: "queued" | "running",
  claimedBy: string | null,
  ending: Ending,
): Promise<Ended | undefined> {
  const [row] = await db
    .update(asyncRuns)
    .set({ ...ending, ...FORGET_REQUEST })
    .where(
      and(
        eq(asyncRuns.id, runId),
        eq(asyncRuns.status, from),
        claimedBy === null ? undefined : eq(asyncRuns.claimedBy, claimedBy),
      ),
    )
    .returning({ followed: asyncRuns.followed });
  return row;
}

/**
 * Marks the run followed and reads it, in one write (see the top of this file for why one). The run as
 * it is now, or `undefined` when it is gone (purged).
 */
export async function followRunRow(db: Database, runId: string): Promise<AsyncRun | undefined> {
  const [row] = await db.update(asyncRuns).set({ followed: true }).where(eq(asyncRuns.id, runId)).returning();
  return row;
}

/** The run's result was handed to the webhook pipeline as `deliveryId` (`none`: it will not be); the secret is forgotten. */
export async function handedOver(db: Database, runId: string, deliveryId: string): Promise<void> {
  await db.update(asyncRuns).set({ deliveryId, webhookSecret: null }).where(eq(asyncRuns.id, runId));
}

/** Finished runs with a webhook whose result was never handed over, finished before `before`. */
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

/** The id of a delivery already recorded for the run, if any. */
export async function recordedDelivery(db: Database, projectId: string, runId: string): Promise<string | undefined> {
  const [row] = await db
    .select({ id: webhookDeliveries.id })
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.projectId, projectId), eq(webhookDeliveries.runId, runId)))
    .limit(1);
  return row?.id;
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
export async function expiredRuns(db: Database, finishedBefore: Date, limit: number) {
  return db
    .select({ id: asyncRuns.id, requestInR2: asyncRuns.requestInR2, resultInR2: asyncRuns.resultInR2 })
    .from(asyncRuns)
    .where(and(isNotNull(asyncRuns.finishedAt), lt(asyncRuns.finishedAt, finishedBefore)))
    .limit(limit);
}

export async function deleteRuns(db: Database, ids: string[]): Promise<void> {
  // D1 binds at most 100 parameters per statement.
  for (let i = 0; i < ids.length; i += 100)
    await db.delete(asyncRuns).where(inArray(asyncRuns.id, ids.slice(i, i + 100)));
}

/** Frees every `Idempotency-Key` older than `before` (Stripe's rule: a key holds for 24 hours). */
export async function releaseKeys(db: Database, before: Date): Promise<void> {
  await db
    .update(asyncRuns)
    .set({ idempotencyKey: null })
    .where(and(isNotNull(asyncRuns.idempotencyKey), lt(asyncRuns.createdAt, before)));
}
