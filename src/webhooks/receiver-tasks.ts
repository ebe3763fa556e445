import { and, eq, inArray, lt, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import {
  type ReceiverTaskKind,
  type WebhookDelivery,
  webhookDeliveries as d,
  type WebhookReceiverTask,
  webhookReceiverTasks as t,
} from "../db/schema";
import { derivedId, newId } from "../platform/ids";
import { idInShardOf, shardOf } from "../platform/shards";
import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import { LANE_CONCURRENCY } from "./lane-capacity";
import { DeliveryLogFullError, inEachLog, logDbOf } from "./log";
import { acceptInLane, type DeliveryMessage, laneName } from "./message";
import { ORIGIN, RECEIVER_STATE_TTL_MS } from "./receiver-controls";
import { openSecret, type SealedSecret, sealSecret } from "./secret-box";

/**
 * A receiver's background tasks (docs/webhook-receivers.md "Recover"): a recovery resends, as `resend`
 * does, every delivery to the receiver whose final outcome in a window failed and that was not
 * delivered since; a release hands the deliveries held while the receiver was paused or disabled back
 * to its lane, in order. Each runs in slices from the alarm of a Durable Object of its own; everything a
 * slice needs is stored (the task's row and cursor in D1, the deliveries it sent, which carry its id, in
 * the project's delivery log: webhooks/log.ts), so a slice that dies is run again by the next alarm and
 * does nothing twice. With the log in the project's objects, a slice reads its 8 logs and D1 (which
 * kept the deliveries recorded before them) and merges what they answer.
 */

/** Deliveries one counting slice reads (ids and dates only). */
export const COUNT_SLICE = 1_000;
/** Deliveries one sending slice hands to the lane: a D1 batch of their rows (≤ 5 rows of 17 columns per statement: D1 binds ≤ 100 parameters). */
export const SEND_SLICE = 30;
/**
 * A task's deliveries not yet settled at once: it hands more only as its lane settles them, so it goes
 * at the lane's pace (≤ LANE_CONCURRENCY in progress there) and keeps a bounded backlog in it.
 */
export const TASK_IN_FLIGHT = 10 * LANE_CONCURRENCY;
/** The wait before a task looks again at a lane that has all it may hold. */
export const TASK_WAIT_MS = 500;
/** A delivery the task recorded but that never got its first attempt this long after: handed to its lane again (the lane keeps each once). */
export const REHAND_AFTER_MS = 30_000;
/**
 * Slices one alarm runs back to back (each ≤ 6 subrequests: reads, one batch, one lane call) before it
 * sets the next alarm: ≤ 60 subrequests, within Workers Free's 50 only with SLICES_PER_ALARM 8; Paid allows 1,000.
 * With the log in the project's objects a slice asks its 8 logs and D1 for each read and writes a call
 * per log: about 60 subrequests a slice at most, 500 an alarm.
 */
export const SLICES_PER_ALARM = 8;

const DEFAULT_SIZES = { sendSlice: SEND_SLICE, inFlight: TASK_IN_FLIGHT };

export interface TaskProgress {
  delivered: number;
  failed: number;
  pending: number;
}

type Task = WebhookReceiverTask;

type LogScope = Pick<Scope, "env" | "db" | "config">;

/** The first `limit` of rows from several databases, each list already in order of (created_at, id). */
function firstOf<T>(lists: T[][], limit: number, at: (row: T) => number, id: (row: T) => string): T[] {
  return lists
    .flat()
    .sort((a, b) => at(a) - at(b) || (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0))
    .slice(0, limit);
}

/**
 * A task's deliveries by status (what it sent that has settled, and what is still on its way), added
 * over every store of its project's deliveries.
 */
export async function taskProgress(scope: LogScope, taskId: string, projectId: string): Promise<TaskProgress> {
  const byStatus = (db: Database) =>
    db
      .select({ status: d.status, n: sql<number>`count(*)` })
      .from(d)
      .where(eq(d.taskId, taskId))
      .groupBy(d.status);
  // Its resends in every store of the project's deliveries (D1 alone, or its logs and D1).
  const rows = (await inEachLog(scope, projectId, byStatus)).flat();
  const of = (status: string) => rows.reduce((n, r) => n + (r.status === status ? r.n : 0), 0);
  return { delivered: of("delivered"), failed: of("failed"), pending: of("pending") + of("held") };
}

export interface NewTask {
  projectId: string;
  origin: string;
  kind: ReceiverTaskKind;
  dryRun: boolean;
  since: Date | null;
  until: Date | null;
  createdBy: string;
}

/** Writes a task's row; `startTask` sets it going. */
export async function createTask(scope: Pick<Scope, "db" | "deps">, task: NewTask): Promise<Task> {
  const now = scope.deps.now();
  const [row] = await scope.db
    .insert(t)
    .values({
      id: newId("wrt", now.getTime()),
      ...task,
      // A release counts as it goes (what is held can grow while a lane's copy of the state is stale).
      status: task.kind === "recover" ? "counting" : "sending",
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return row!;
}

/** The Durable Object that runs `taskId`'s slices (one per task, addressed by its id). */
export const receiverTaskObject = (env: Env, taskId: string) =>
  env.WEBHOOK_RECEIVER_TASKS.get(env.WEBHOOK_RECEIVER_TASKS.idFromName(taskId));

/** How a task was started: for a release, whether the receiver's lanes were told of the resume (`tellLanes`). */
export interface TaskStart {
  statePushed?: boolean;
}

export async function startTask(env: Env, taskId: string, start: TaskStart = {}): Promise<void> {
  await receiverTaskObject(env, taskId).start(taskId, start);
}

/** The running (not finished, not cancelled) task of `kind` on a receiver, if any. */
export async function runningTask(scope: Pick<Scope, "db">, projectId: string, origin: string, kind: ReceiverTaskKind) {
  const [row] = await scope.db
    .select()
    .from(t)
    .where(
      and(
        eq(t.projectId, projectId),
        eq(t.origin, origin),
        inArray(t.status, ["counting", "sending"]),
        eq(t.kind, kind),
        eq(t.dryRun, false),
      ),
    )
    .limit(1);
  return row ?? null;
}

/** Cancels a task that is still running: its slices stop; deliveries it already handed to the lane go on. */
export async function cancelTask(scope: Pick<Scope, "db" | "deps">, taskId: string): Promise<void> {
  const now = scope.deps.now();
  await scope.db
    .update(t)
    .set({ status: "cancelled", updatedAt: now, finishedAt: now })
    .where(and(eq(t.id, taskId), inArray(t.status, ["counting", "sending"])));
}

/** A delivery's lane message, rebuilt from its record (body or R2 key and sealed secret are stored on it). */
export function messageOfRecord(row: WebhookDelivery): DeliveryMessage {
  return {
    v: 1,
    id: row.id,
    messageId: row.messageId ?? row.id,
    projectId: row.projectId,
    runId: row.runId,
    endpoint: row.endpoint,
    createdAt: row.createdAt.getTime(),
    bodyBytes: row.bodyBytes,
    body: row.body !== null ? { inline: row.body } : { r2: row.bodyKey! },
    secret: row.sealedSecret === null ? null : (JSON.parse(row.sealedSecret) as SealedSecret),
  };
}

/** Hands messages to their lanes, in order (one `accept` per lane). */
export type HandTo = (messages: DeliveryMessage[]) => Promise<void>;

export const laneHandTo =
  (env: Env): HandTo =>
  async (messages) => {
    const byLane = Map.groupBy(messages, (m) => laneName(m));
    // A full lane throws (LaneFullError): the slice is handed to it again later.
    for (const [name, batch] of byLane) await acceptInLane(env, name, batch);
  };

/**
 * Deliveries of the recovery's window, after its cursor, oldest first: failed ones (by their record's
 * creation) whose message has no delivery that is delivered, on its way (pending, held), or already
 * sent by this task, and of which no earlier failed one is in the window (one resend per message).
 */
function recoverCandidates(task: Task, columns: ReturnType<typeof sql>, limit: number) {
  const since = task.since!.getTime();
  const cursorAt = task.cursorAt ?? -1;
  const cursorId = task.cursorId ?? "";
  return sql`SELECT ${columns} FROM webhook_deliveries
    WHERE project_id = ${task.projectId} AND ${ORIGIN} = ${task.origin}
      AND created_at >= ${since} AND created_at < ${task.until!.getTime()}
      AND (created_at > ${cursorAt} OR (created_at = ${cursorAt} AND id > ${cursorId}))
      AND status = 'failed'
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
        WHERE e.project_id = webhook_deliveries.project_id AND e.message_id = webhook_deliveries.message_id
          AND (e.status != 'failed' OR e.task_id = ${task.id}
            OR (e.created_at >= ${since} AND (e.created_at < webhook_deliveries.created_at
              OR (e.created_at = webhook_deliveries.created_at AND e.id < webhook_deliveries.id)))))
    ORDER BY created_at, id LIMIT ${limit}`;
}

interface CandidateRow {
  id: string;
  created_at: number;
  run_id: string;
  message_id: string | null;
}

/**
 * The recovery's next `limit` deliveries after its cursor (`recoverCandidates`) over its project's logs,
 * merged in order of (created_at, id): the cursor is one order across the logs. `read` is every row
 * looked at (the cursor moves past them); `kept` those of them to resend.
 */
async function nextCandidates<R extends CandidateRow>(
  scope: LogScope,
  task: Task,
  columns: ReturnType<typeof sql>,
  limit: number,
) {
  const lists = await inEachLog(scope, task.projectId, (db) => db.all<R>(recoverCandidates(task, columns, limit)));
  // D1's answer is the last (`projectLogDbs`), after the logs' when there are logs.
  const inD1 = new Set(scope.config.deliveryLogStore === "objects" ? lists.at(-1)!.map((r) => r.id) : []);
  const read = firstOf(
    lists,
    limit,
    (r) => r.created_at,
    (r) => r.id,
  );
  const answered = await answeredInLogs(
    scope,
    task,
    read.filter((r) => inD1.has(r.id)),
  );
  return { read, kept: read.filter((r) => !answered.has(r.message_id ?? r.id)) };
}

/**
 * Of candidates D1 answered beside the logs (recorded before them), the messages their logs answer
 * for: delivered or on its way there, sent by this task, or failed there in the window (the log's
 * candidate, resent in its place). The query's NOT EXISTS sees one database; a message's later
 * deliveries (a resend, this task's) are in its run's log, so that log is the one asked.
 */
async function answeredInLogs(scope: LogScope, task: Task, rows: CandidateRow[]): Promise<Set<string>> {
  const answered = new Set<string>();
  for (const group of Map.groupBy(rows, (r) => shardOf(r.run_id)).values()) {
    const messages = group.map((r) => r.message_id ?? r.id);
    const found = await logDbOf(scope, task.projectId, group[0]!.run_id).all<{ message_id: string }>(
      sql`SELECT DISTINCT message_id FROM webhook_deliveries
        WHERE project_id = ${task.projectId} AND message_id IN (SELECT value FROM json_each(${JSON.stringify(messages)}))
          AND (status != 'failed' OR task_id = ${task.id}
            OR (created_at >= ${task.since!.getTime()} AND created_at < ${task.until!.getTime()}))`,
    );
    for (const r of found) answered.add(r.message_id);
  }
  return answered;
}

const SENDABLE = sql`(body IS NOT NULL OR body_key IS NOT NULL) AND body_purged_at IS NULL`;

/** One counting slice: the window's deliveries to resend, past the retention, or with no body ever stored. */
async function countSlice(scope: Scope, task: Task): Promise<number | null> {
  const { read, kept: rows } = await nextCandidates<CandidateRow & { purged: number; sendable: number }>(
    scope,
    task,
    sql`id, created_at, run_id, message_id, body_purged_at IS NOT NULL AS purged, ${SENDABLE} AS sendable`,
    COUNT_SLICE,
  );
  const last = read.at(-1);
  const done = read.length < COUNT_SLICE;
  const now = scope.deps.now();
  const next = done
    ? task.dryRun
      ? { status: "finished" as const, finishedAt: now, cursorAt: null, cursorId: null }
      : // The sending pass finds again what it cannot send (a body may be purged meanwhile): it counts it anew.
        { status: "sending" as const, cursorAt: null, cursorId: null, expired: 0, unsendable: 0 }
    : { cursorAt: last!.created_at, cursorId: last!.id };
  await scope.db
    .update(t)
    .set({
      counted: sql`${t.counted} + ${rows.filter((r) => r.sendable).length}`,
      expired: sql`${t.expired} + ${rows.filter((r) => r.purged).length}`,
      unsendable: sql`${t.unsendable} + ${rows.filter((r) => !r.sendable && !r.purged).length}`,
      updatedAt: now,
      ...next,
    })
    .where(and(eq(t.id, task.id), eq(t.status, "counting"), cursorIs(task)));
  return done && task.dryRun ? null : 0;
}

/** The task row still where this slice found it (a slice run twice at once writes once). */
const cursorIs = (task: Task) =>
  and(
    task.cursorAt === null ? sql`${t.cursorAt} IS NULL` : eq(t.cursorAt, task.cursorAt),
    task.cursorId === null ? sql`${t.cursorId} IS NULL` : eq(t.cursorId, task.cursorId),
  );

/** A resend of `original` made by the task: its own record and id, the original's message id, the secret sealed again under the new id. */
async function resendRecord(scope: Scope, task: Task, original: WebhookDelivery, at: Date) {
  // One id per (task, original): a slice that runs again writes nothing twice. In the run's shard, as every delivery's.
  const id = idInShardOf(await derivedId("whd", task.createdAt.getTime(), `${task.id} ${original.id}`), original.runId);
  let sealedSecret: string | null = null;
  if (original.signed) {
    const secret = await openSecret(
      scope.config.webhookEncryptionKey,
      original.id,
      JSON.parse(original.sealedSecret!) as SealedSecret,
      scope.config.previous.webhookEncryptionKey,
    );
    sealedSecret = JSON.stringify(await sealSecret(scope.config.webhookEncryptionKey, id, secret));
  }
  return {
    id,
    projectId: original.projectId,
    runId: original.runId,
    appName: original.appName,
    endpoint: original.endpoint,
    signed: original.signed,
    bodyBytes: original.bodyBytes,
    status: "pending" as const,
    attemptCount: 0,
    createdAt: at,
    updatedAt: at,
    // The original's stored body (or its R2 object, which the retention purge removes with the original).
    body: original.body,
    bodyKey: original.body === null ? original.bodyKey : null,
    sealedSecret,
    resentFrom: original.id,
    messageId: original.messageId ?? original.id,
    taskId: task.id,
  };
}

const ROWS_PER_INSERT = 5;
/** The wait before a recovery writes again to a log that was full (its `Retry-After`). */
const LOG_FULL_WAIT_MS = 60_000;

/** `id IN (…)` as one bound parameter (D1 binds at most 100 per statement). */
const idIn = (ids: string[]) => sql`${d.id} IN (SELECT value FROM json_each(${JSON.stringify(ids)}))`;

/** Deliveries the task sent that are still on their way, and those of them never attempted for a while (handed to the lane again). */
async function inFlight(scope: Scope, task: Task, handTo: HandTo, slice: number): Promise<number> {
  // Each database that holds some of them: its count, and its oldest stuck ones.
  const asked = await inEachLog(scope, task.projectId, async (db) => {
    const [{ n }] = (await db
      .select({ n: sql<number>`count(*)` })
      .from(d)
      .where(and(eq(d.taskId, task.id), eq(d.status, "pending")))) as [{ n: number }];
    if (n === 0) return { db, n, stuck: [] };
    const stuck = await db
      .select()
      .from(d)
      .where(
        and(
          eq(d.taskId, task.id),
          eq(d.status, "pending"),
          eq(d.attemptCount, 0),
          lt(d.updatedAt, new Date(scope.deps.now().getTime() - REHAND_AFTER_MS)),
        ),
      )
      .orderBy(d.createdAt, d.id)
      .limit(slice);
    return { db, n, stuck };
  });
  const n = asked.reduce((sum, a) => sum + a.n, 0);
  if (n === 0) return 0;
  const stuck = firstOf(
    asked.map((a) => a.stuck.map((row) => ({ row, db: a.db }))),
    slice,
    (s) => s.row.createdAt.getTime(),
    (s) => s.row.id,
  );
  if (stuck.length > 0) {
    const at = scope.deps.now();
    for (const [db, rows] of Map.groupBy(stuck, (s) => s.db))
      await db
        .update(d)
        .set({ updatedAt: at })
        .where(idIn(rows.map((s) => s.row.id)));
    await handTo(stuck.map((s) => messageOfRecord(s.row)));
  }
  return n;
}

async function finish(scope: Scope, task: Task, onFinished?: OnFinished): Promise<null> {
  const now = scope.deps.now();
  const [done] = await scope.db
    .update(t)
    .set({ status: "finished", updatedAt: now, finishedAt: now })
    .where(and(eq(t.id, task.id), eq(t.status, "sending")))
    .returning();
  if (done) await onFinished?.(done);
  return null;
}

/** One sending slice of a recovery: the next resends, each its own record, handed to the lane in order. */
async function recoverSlice(scope: Scope, task: Task, options: SliceOptions) {
  const { handTo, onFinished } = options;
  const sizes = options.sizes ?? DEFAULT_SIZES;
  const pending = await inFlight(scope, task, handTo, sizes.sendSlice);
  const room = sizes.inFlight - pending;
  if (room <= 0) return TASK_WAIT_MS;
  const limit = Math.min(sizes.sendSlice, room);
  const { read, kept } = await nextCandidates<CandidateRow & Record<string, unknown>>(scope, task, sql`*`, limit);
  if (read.length === 0) return pending === 0 ? finish(scope, task, onFinished) : TASK_WAIT_MS;
  const originals = kept.map(deliveryOfRow);
  const at = scope.deps.now();
  const resends: Awaited<ReturnType<typeof resendRecord>>[] = [];
  let unsendable = 0;
  let expired = 0;
  for (const original of originals) {
    if (original.bodyPurgedAt !== null) expired++;
    else if (original.body === null && original.bodyKey === null) unsendable++;
    else {
      try {
        resends.push(await resendRecord(scope, task, original, at));
      } catch (error) {
        // Never resend a signed delivery unsigned: a secret that no longer opens is not sent.
        log("error", "webhook recovery: a delivery's secret no longer opens", { delivery_id: original.id, error });
        unsendable++;
      }
    }
  }
  const last = read.at(-1)!;
  const inserts = (db: Database, records: typeof resends) => {
    const statements = [];
    for (let i = 0; i < records.length; i += ROWS_PER_INSERT)
      statements.push(
        db
          .insert(d)
          .values(records.slice(i, i + ROWS_PER_INSERT))
          .onConflictDoNothing(),
      );
    return statements;
  };
  const advance = scope.db
    .update(t)
    .set({
      sent: sql`${t.sent} + ${resends.length}`,
      // Counted before sending; what became sendable since (a late failure in the window) counts as it goes.
      counted: sql`max(${t.counted}, ${t.sent} + ${resends.length})`,
      // Past the retention or never stored now, though countable when counted.
      expired: sql`${t.expired} + ${expired}`,
      unsendable: sql`${t.unsendable} + ${unsendable}`,
      cursorAt: last.created_at,
      cursorId: last.id,
      updatedAt: at,
    })
    .where(and(eq(t.id, task.id), eq(t.status, "sending"), cursorIs(task)));
  if (scope.config.deliveryLogStore !== "objects") {
    // The resends and the cursor's move commit together: a slice run again finds them sent (this task's id).
    await scope.db.batch([advance, ...inserts(scope.db, resends)]);
  } else {
    // The resends go to their logs (each in its original's: `resendRecord`), then the cursor moves in
    // D1: no transaction spans them. A slice that dies between finds them sent (this task's id, in the
    // same log as their originals) and passes them by, left out of `sent` (its progress counts them);
    // `inFlight` hands them to the lane. A log's call adds deliveries, and one past its bound refuses
    // it: the slice waits for its retention (what it wrote before is found sent when it runs again).
    try {
      for (const records of Map.groupBy(resends, (r) => shardOf(r.id)).values()) {
        const db = logDbOf(scope, task.projectId, records[0]!.id, { grows: true });
        const [first, ...rest] = inserts(db, records);
        await db.batch([first!, ...rest]);
      }
    } catch (error) {
      if (!(error instanceof DeliveryLogFullError)) throw error;
      log("warn", "webhook recovery: a delivery log is full; the slice waits for its retention", {
        task_id: task.id,
        log: error.log,
      });
      return LOG_FULL_WAIT_MS;
    }
    await advance;
  }
  if (resends.length > 0) {
    try {
      await handTo(resends.map((r) => messageOfRecord(r as WebhookDelivery)));
    } catch (error) {
      // Written, pending, never attempted: `inFlight` hands them to the lane again.
      log("warn", "webhook recovery: the lane did not take a slice; it is handed to the lane again later", {
        task_id: task.id,
        error,
      });
      return TASK_WAIT_MS;
    }
  }
  return 0;
}

/**
 * How long after its start a release waits before it looks for what is held: none when the resume was
 * told to the receiver's lanes (`statePushed`: each answered once it held the new state and had written
 * every delivery it held on the former one). Else a lane may still trust a copy of the paused state it
 * read before the resume (for RECEIVER_STATE_TTL_MS from the read's answer, which may come after the
 * task's start) and hold what comes meanwhile: twice the TTL covers that copy, its read and its holds.
 */
export const releaseWaitMs = (statePushed: boolean | undefined): number =>
  statePushed ? 0 : 2 * RECEIVER_STATE_TTL_MS;

/**
 * One slice of a release: the oldest held deliveries back to `pending` (with the task's id), handed to
 * their lane in order. Ends once nothing is held, nothing it sent is on its way, and every lane knows
 * the receiver resumed (after that, nothing new is held).
 */
async function releaseSlice(scope: Scope, task: Task, options: SliceOptions) {
  const { handTo, onFinished } = options;
  const sizes = options.sizes ?? DEFAULT_SIZES;
  // A lane that still takes the receiver for paused would hold again what is released now: the release
  // starts once every lane knows of the resume (from the task's start, on the wall clock the lanes'
  // copies age by).
  const stale = (options.startedAt ?? 0) + releaseWaitMs(options.statePushed) - Date.now();
  if (stale > 0) return stale;
  const pending = await inFlight(scope, task, handTo, sizes.sendSlice);
  const room = sizes.inFlight - pending;
  if (room <= 0) return TASK_WAIT_MS;
  const limit = Math.min(sizes.sendSlice, room);
  // The oldest held over the project's logs, each released where it is recorded.
  const lists = await inEachLog(scope, task.projectId, async (db) =>
    (
      await db
        .select({ id: d.id, createdAt: d.createdAt })
        .from(d)
        .where(and(eq(d.status, "held"), eq(d.projectId, task.projectId), sql`${ORIGIN} = ${task.origin}`))
        .orderBy(d.createdAt, d.id)
        .limit(limit)
    ).map((row) => ({ ...row, db })),
  );
  const held = firstOf(
    lists,
    limit,
    (h) => h.createdAt.getTime(),
    (h) => h.id,
  );
  const now = scope.deps.now();
  if (held.length === 0) return pending === 0 ? finish(scope, task, onFinished) : TASK_WAIT_MS;
  const released: WebhookDelivery[] = [];
  for (const [db, rows] of Map.groupBy(held, (h) => h.db))
    released.push(
      ...(await db
        .update(d)
        .set({ status: "pending", taskId: task.id, lastError: null, updatedAt: now })
        .where(and(idIn(rows.map((h) => h.id)), eq(d.status, "held")))
        .returning()),
    );
  released.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : 1));
  await scope.db
    .update(t)
    .set({
      sent: sql`${t.sent} + ${released.length}`,
      counted: sql`max(${t.counted}, ${t.sent} + ${released.length})`,
      updatedAt: now,
    })
    .where(eq(t.id, task.id));
  try {
    await handTo(released.map(messageOfRecord));
  } catch (error) {
    log("warn", "webhook release: the lane did not take a slice; it is handed to the lane again later", {
      task_id: task.id,
      error,
    });
    return TASK_WAIT_MS;
  }
  return 0;
}

/** A raw row of `webhook_deliveries` (snake_case, times in ms) as drizzle's record. */
function deliveryOfRow(r: Record<string, unknown>): WebhookDelivery {
  const date = (v: unknown) => (v === null ? null : new Date(v as number));
  return {
    id: r.id as string,
    projectId: r.project_id as string,
    runId: r.run_id as string,
    endpoint: r.endpoint as string,
    signed: Boolean(r.signed),
    bodyBytes: r.body_bytes as number,
    status: r.status as WebhookDelivery["status"],
    attemptCount: r.attempt_count as number,
    lastStatusCode: r.last_status_code as number | null,
    lastError: r.last_error as string | null,
    createdAt: date(r.created_at)!,
    updatedAt: date(r.updated_at)!,
    completedAt: date(r.completed_at),
    body: r.body as string | null,
    bodyKey: r.body_key as string | null,
    sealedSecret: r.sealed_secret as string | null,
    bodyPurgedAt: date(r.body_purged_at),
    resentFrom: r.resent_from as string | null,
    messageId: r.message_id as string | null,
    appName: r.app_name as string | null,
    taskId: r.task_id as string | null,
  };
}

/** Told once when a task finishes (the recovery's `webhook.recovery.finished` alert). */
export type OnFinished = (task: Task) => Promise<void>;

/**
 * One slice of `taskId`: what it does depends on the task's row alone. Returns the wait before the
 * next slice (ms), or null when the task is over (finished, cancelled, or gone with its project).
 */
export interface SliceOptions {
  handTo: HandTo;
  /** SEND_SLICE and TASK_IN_FLIGHT, unless a test asks for others. */
  sizes?: { sendSlice: number; inFlight: number };
  onFinished?: OnFinished;
  /** When the task's object started it (wall clock, ms). */
  startedAt?: number;
  /** A release's: whether the resume was told to the receiver's lanes (`releaseWaitMs`). */
  statePushed?: boolean;
}

export async function runSlice(
  scope: Scope,
  taskId: string,
  options: Partial<SliceOptions> = {},
): Promise<number | null> {
  const [task] = await scope.db.select().from(t).where(eq(t.id, taskId));
  if (!task || task.status === "finished" || task.status === "cancelled") return null;
  const full = { ...options, handTo: options.handTo ?? laneHandTo(scope.env) };
  if (task.status === "counting") return countSlice(scope, task);
  return task.kind === "recover" ? recoverSlice(scope, task, full) : releaseSlice(scope, task, full);
}
