import { and, eq, type SQL, sql } from "drizzle-orm";
import type { SQLiteColumn as Column } from "drizzle-orm/sqlite-core";
import type { Database } from "../db/client";
import { type AttemptOutcome, projects, webhookAttempts, webhookDeliveries } from "../db/schema";
import { prepared, type StatementGroup } from "../db/statement-group";
import type { DeliveryMessage } from "./message";
import { MAX_ATTEMPTS, SWEPT_REASONS } from "./policy";

/**
 * The D1 statements of a delivery's life. D1 is where the attempt count lives: the queue sends a
 * message at least once and may send it again after a crash, so `msg.attempts` says how often the
 * queue sent the message, not how often the receiver was called.
 *
 * A first-attempt success costs 3 statements: the `pending` row before the run
 * (`writePendingDelivery`), the claim of attempt 1 (`claimAttempt`), the attempt's outcome
 * (`insertAttempt`, one INSERT; a trigger settles the delivery row in the same statement). The
 * lane sends the claims of its deliveries in progress together and their outcomes together
 * (`StatementGroup`), so six first-attempt successes at once cost 2 D1 round trips.
 */

export type Claim =
  /** This invocation owns attempt `attempt` (1…3); the receiver may be called once for it. */
  | { kind: "attempt"; attempt: number }
  /** Delivered or failed already (a duplicate message, a redelivery after the outcome was written). */
  | { kind: "settled" }
  /** Pending, but every attempt is claimed: another copy is on the last one, or it died before recording. */
  | { kind: "exhausted"; attempts: number; updatedAt: Date }
  /** No row, and the message cannot create one (its project was deleted). */
  | { kind: "gone" };

/**
 * `(col, …) SELECT :col, … WHERE EXISTS (…)`: an INSERT of the placeholders named after `columns`'
 * keys that writes nothing, and fails for nothing, when `exists` finds no row.
 */
function insertIfExists(columns: Record<string, Column>, exists: SQL) {
  const entries = Object.entries(columns);
  return sql`(${sql.join(
    entries.map(([, column]) => sql.identifier(column.name)),
    sql`, `,
  )}) SELECT ${sql.join(
    // The column's own encoding (booleans as 0/1, timestamps in ms), as `.values()` would apply.
    entries.map(([name, column]) => sql.param(sql.placeholder(name), column)),
    sql`, `,
  )} WHERE EXISTS (${exists})`;
}

const name = (column: Column) => sql.identifier(column.name);

const d = webhookDeliveries;
const claimColumns = {
  id: d.id,
  projectId: d.projectId,
  runId: d.runId,
  endpoint: d.endpoint,
  signed: d.signed,
  bodyBytes: d.bodyBytes,
  status: d.status,
  attemptCount: d.attemptCount,
  createdAt: d.createdAt,
  updatedAt: d.updatedAt,
  body: d.body,
  bodyKey: d.bodyKey,
  sealedSecret: d.sealedSecret,
  messageId: d.messageId,
};
const keep = (column: Column) => sql`${name(column)} = coalesce(${column}, excluded.${name(column)})`;

/**
 * The claim of the next attempt, one conditional upsert. The row is created here if the run path
 * could not write it (D1 hiccuped at enqueue), with the body and sealed secret the message carries
 * (kept for resending), but only while the project exists: the statement never fails on its own, so
 * it can share a D1 batch with other deliveries' claims (`StatementGroup`). SQLite reads `INSERT …
 * SELECT … ON CONFLICT` only when the SELECT has a WHERE clause: it has.
 */
const claimStatementIf = (exists: () => SQL) =>
  prepared<{ [K in keyof typeof claimColumns]: unknown }>(() => {
    // The sweeper's verdict on a delivery it saw no end of is provisional: a message that reaches the
    // consumer after it (a queue backlog longer than STALE_AFTER_MS) takes the delivery up again.
    const sweptFailed = sql`${d.status} = 'failed' AND ${d.lastError} IN (${sql.join(
      SWEPT_REASONS.map((reason) => sql`${reason}`),
      sql`, `,
    )})`;
    const unlessSwept = (column: Column, value: SQL) =>
      sql`${name(column)} = CASE WHEN ${sweptFailed} THEN ${value} ELSE ${column} END`;
    return sql`INSERT INTO ${d} ${insertIfExists(claimColumns, exists())}
    ON CONFLICT (${name(d.id)}) DO UPDATE SET
      ${name(d.attemptCount)} = ${d.attemptCount} + 1, ${name(d.updatedAt)} = excluded.${name(d.updatedAt)},
      ${name(d.bodyBytes)} = excluded.${name(d.bodyBytes)}, ${keep(d.body)}, ${keep(d.bodyKey)}, ${keep(d.sealedSecret)},
      ${unlessSwept(d.lastError, sql`NULL`)}, ${unlessSwept(d.completedAt, sql`NULL`)}, ${name(d.status)} = 'pending'
    WHERE (${d.status} = 'pending' OR (${sweptFailed})) AND ${d.attemptCount} < ${MAX_ATTEMPTS}
    RETURNING ${name(d.attemptCount)}`;
  });
/** D1's: the row is made only while the project exists. */
const claimStatement = claimStatementIf(
  () => sql`SELECT 1 FROM ${projects} WHERE ${projects.id} = ${sql.placeholder("projectId")}`,
);
/**
 * A project's log's (webhooks/log.ts): it has no `projects` table, and it is the project's own, so the
 * row is always made. (The API deletes no project; one an operator removes from D1 keeps its logs until
 * their retention empties them.)
 */
const claimStatementInLog = claimStatementIf(() => sql`SELECT 1`);

/** The columns of a delivery's `pending` row, as the run path writes it before the app is called. */
const pendingColumns = {
  id: d.id,
  projectId: d.projectId,
  runId: d.runId,
  appName: d.appName,
  endpoint: d.endpoint,
  signed: d.signed,
  bodyBytes: d.bodyBytes,
  status: d.status,
  createdAt: d.createdAt,
  updatedAt: d.updatedAt,
  sealedSecret: d.sealedSecret,
  resentFrom: d.resentFrom,
  messageId: d.messageId,
};
export type PendingRow = { [K in keyof typeof pendingColumns]: unknown };

/**
 * The `pending` row's INSERT, rendered once per isolate (`prepared`): it runs before every run with a
 * webhook calls its app, so drizzle's query building stays off that path. With `exists`, the row is
 * written only when that query finds a row (an async run's end writes its delivery only if the same
 * D1 batch ended the run: runs/async/store.ts).
 */
export const pendingInsert = (exists: () => SQL = () => sql`SELECT 1`) =>
  prepared<PendingRow>(() => sql`INSERT INTO ${d} ${insertIfExists(pendingColumns, exists())}`);

/**
 * Claims the next attempt (`claimStatement`), through `group` when given: the claims of one queue
 * batch's deliveries then travel to D1 as one round trip.
 */
export async function claimAttempt(
  db: Database,
  message: DeliveryMessage,
  at: Date,
  group?: StatementGroup,
  inLog = false,
): Promise<Claim> {
  const statement = (inLog ? claimStatementInLog : claimStatement)(db, {
    id: message.id,
    projectId: message.projectId,
    runId: message.runId,
    endpoint: message.endpoint,
    signed: message.secret !== null,
    bodyBytes: message.bodyBytes,
    status: "pending",
    attemptCount: 1,
    createdAt: new Date(message.createdAt),
    updatedAt: at,
    body: "inline" in message.body ? message.body.inline : null,
    bodyKey: "r2" in message.body ? message.body.r2 : null,
    sealedSecret: message.secret ? JSON.stringify(message.secret) : null,
    messageId: message.messageId ?? message.id,
  });
  const { results } = await (group
    ? group.run<{ attempt_count: number }>(statement)
    : statement.all<{ attempt_count: number }>());
  if (results.length === 1) return { kind: "attempt", attempt: results[0]!.attempt_count };
  // Refused (or no project, so no row): the rare path, one read to say why.
  const [row] = await db
    .select({ status: d.status, attempts: d.attemptCount, updatedAt: d.updatedAt })
    .from(d)
    .where(eq(d.id, message.id));
  if (!row) return { kind: "gone" };
  if (row.status !== "pending") return { kind: "settled" };
  return { kind: "exhausted", attempts: row.attempts, updatedAt: row.updatedAt };
}

/** One attempt as `webhook_attempts` keeps it. */
export interface AttemptRow {
  deliveryId: string;
  attempt: number;
  at: Date;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  outcome: AttemptOutcome;
}

const a = webhookAttempts;
const attemptColumns = {
  deliveryId: a.deliveryId,
  attempt: a.attempt,
  at: a.at,
  statusCode: a.statusCode,
  error: a.error,
  durationMs: a.durationMs,
  outcome: a.outcome,
};

/**
 * One INSERT: the attempt, and (by the trigger `webhook_attempt_settles`) the delivery's last outcome
 * and status. It writes nothing if the delivery is gone (its project deleted meanwhile) or the
 * attempt is on record already, so it never fails on its own and may share a batch.
 */
const attemptStatement = prepared<{ [K in keyof typeof attemptColumns]: unknown }>(
  () =>
    sql`INSERT INTO ${a} ${insertIfExists(attemptColumns, sql`SELECT 1 FROM ${d} WHERE ${d.id} = ${sql.placeholder("deliveryId")}`)} ON CONFLICT DO NOTHING`,
);

/** Records an attempt (`attemptStatement`), through `group` when given. */
export async function insertAttempt(db: Database, row: AttemptRow, group?: StatementGroup) {
  const statement = attemptStatement(db, row);
  await (group ? group.run(statement) : statement.run());
}

/** Settles a delivery still `pending` as failed with `reason` (dead-letter queue, a lost outcome, a cut-short run); null if it was not pending. */
export async function failPending(
  db: Database,
  deliveryId: string,
  at: Date,
  reason: string,
): Promise<{ attempts: number } | null> {
  const [row] = await db
    .update(webhookDeliveries)
    .set({ status: "failed", lastError: reason, updatedAt: at, completedAt: at })
    .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.status, "pending")))
    .returning({ attempts: webhookDeliveries.attemptCount });
  return row ?? null;
}
