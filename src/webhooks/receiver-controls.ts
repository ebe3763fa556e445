import { and, eq, lt, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import {
  auditLog,
  projects,
  type ReceiverState,
  WEBHOOK_ORIGIN_SQL,
  webhookDeliveries as d,
  webhookReceivers,
} from "../db/schema";
import { newId } from "../platform/ids";
import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import type { DeliveryContext } from "./attempt/context";
import type { DeliveryMessage } from "./message";
import { SWEPT_REASONS } from "./policy";
import { LANE_CONCURRENCY } from "./lane-capacity";
import {
  type ReceiverSettings,
  receiverSettings,
  STATE_CHANGED_AT,
  stateVersion,
  tellLanes,
} from "./receiver-settings";

/**
 * A receiver's controls (docs/webhook-receivers.md "Receivers you control"): the hold of a paused or
 * disabled receiver's new deliveries, a receiver that says stop (410 Gone, `webhook-delivery:
 * disable`), and the disable of one that failed every delivery for a span. Pause, resume and recover
 * are the routes' (receiver-api.ts); sending what is held or failed again is the tasks'
 * (receiver-tasks.ts).
 */

/** The receiver origin of an endpoint (`new URL(endpoint).origin`); the endpoint itself when it does not parse. */
export function originOf(endpoint: string): string {
  try {
    return new URL(endpoint).origin;
  } catch {
    return endpoint;
  }
}

/** `WEBHOOK_ORIGIN_SQL` for drizzle: word for word the indexed expression, so SQLite uses the index. */
export const ORIGIN = sql.raw(WEBHOOK_ORIGIN_SQL);

/** Why a delivery is held, as its `last_error` says. */
export const HELD_REASONS = { paused: "receiver_paused", disabled: "receiver_disabled" } as const;
/** A delivery held longer than the body retention ends `failed` with this. */
export const HELD_PAST_RETENTION = "held_past_retention";

/**
 * How long a lane trusts the receiver's state it read or was told: a backstop, not the way a change
 * reaches it. Every change of the state is told to the receiver's lanes as it is written (a push:
 * receiver-settings.ts `tellLanes`, lane.ts `configure`), so a pause takes effect at once; a lane reads
 * the state again from D1 (the authority) once its copy is this old, which bounds how long a change
 * whose push failed goes unseen. The release task waits twice this after a resume whose push failed
 * before it concludes that nothing more will be held (receiver-tasks.ts).
 */
export const RECEIVER_STATE_TTL_MS = 60_000;

/** A receiver's state as one lane knows it. */
interface KnownState {
  state: ReceiverState;
  /** The order of its change (receiver-settings.ts `stateVersion`): a lane told an older one keeps this. */
  version: number;
  /** When the lane read the state or was told it (its clock, ms). */
  stateAt: number;
  failingSince: number | null;
  /** When the lane read `failing_since` (0: never), which only its lanes write. */
  failingAt: number;
}

/**
 * The receivers' states a lane knows: told by the control plane at each change (`told`), else read from
 * D1 once what it has is RECEIVER_STATE_TTL_MS old: one D1 read per receiver a minute at most, never one
 * per delivery. With the state, since when its deliveries fail (`failing_since`), which the lane writes
 * only when it changes (`settled`), read with the state. What the lane was told wins over a read begun
 * before it (its answer may predate the change), and a later change over an earlier one told after it.
 */
export class ReceiverStates {
  readonly #known = new Map<string, KnownState>();
  /** Counts what the lane was told: a read begun before the last tell does not overwrite it. */
  #tells = 0;
  /** Deliveries being held on the state as the lane knew it (their D1 writes under way). */
  readonly #holding = new Set<Promise<unknown>>();

  /** `now`: the lane's clock (ms), which tests move by hand. */
  constructor(private readonly now: () => number = Date.now) {}

  /**
   * The receiver's settings read from D1, what the lane knows of its state refreshed by them (unless it
   * was told of a change meanwhile): a read that serves both the lane's settings and its states.
   */
  async read(db: Database, projectId: string, origin: string): Promise<ReceiverSettings> {
    const tells = this.#tells;
    const settings = await receiverSettings(db, projectId, origin);
    const at = this.now();
    const key = `${projectId} ${origin}`;
    const before = this.#known.get(key);
    const version = stateVersion(settings);
    const current = !before || (tells === this.#tells && version >= before.version);
    this.#known.set(key, {
      ...(current ? { state: settings.state, version, stateAt: at } : before),
      failingSince: settings.failingSince?.getTime() ?? null,
      failingAt: at,
    });
    return settings;
  }

  /** What the lane knows of the receiver, read again when the part asked for is older than RECEIVER_STATE_TTL_MS. */
  async #fresh(db: Database, projectId: string, origin: string, part: "stateAt" | "failingAt") {
    const key = `${projectId} ${origin}`;
    const known = this.#known.get(key);
    if (known && this.now() - known[part] < RECEIVER_STATE_TTL_MS) return known;
    await this.read(db, projectId, origin);
    return this.#known.get(key)!;
  }

  /**
   * The lane was told the receiver's state (a change written in D1 and pushed to it): kept at once, for
   * RECEIVER_STATE_TTL_MS, unless it knows a later change (`version`). False when it was older.
   */
  told(projectId: string, origin: string, state: ReceiverState, version: number): boolean {
    const key = `${projectId} ${origin}`;
    const before = this.#known.get(key);
    if (before && version < before.version) return false;
    this.#tells++;
    this.#known.set(key, {
      state,
      version,
      stateAt: this.now(),
      failingSince: before?.failingSince ?? null,
      failingAt: before?.failingAt ?? 0,
    });
    return true;
  }

  /** What the lane learnt itself (the receiver said stop): no need to read it back. */
  set(projectId: string, origin: string, state: ReceiverState): void {
    this.told(projectId, origin, state, this.#known.get(`${projectId} ${origin}`)?.version ?? 0);
  }

  /**
   * Whether a delivery about to take its first attempt is held: `hold` (its write) runs when the
   * receiver is not active, and `holdsWritten` waits for it until it is done.
   */
  async holding(
    db: Database,
    projectId: string,
    origin: string,
    hold: (state: Exclude<ReceiverState, "active">) => Promise<boolean>,
  ): Promise<boolean> {
    const { state } = await this.#fresh(db, projectId, origin, "stateAt");
    if (state === "active") return false;
    const held = hold(state);
    this.#holding.add(held);
    return held.finally(() => this.#holding.delete(held));
  }

  /**
   * Resolves once every delivery held on the state as the lane knew it before this call is written:
   * after a resume was told, nothing is held on the former state any more (the release task counts on it).
   */
  async holdsWritten(): Promise<void> {
    await Promise.allSettled([...this.#holding]);
  }

  /**
   * A delivery to the receiver settled: `failed` marks it failing (since `at`, unless it already was),
   * `delivered` clears the mark. One D1 write per change of the mark, none while it stays as it is (a
   * flapping receiver costs one write per change, beside its deliveries' several each). Each lane of a
   * receiver keeps its own copy of the mark: with shards, one may miss another's change until it reads
   * the mark again (RECEIVER_STATE_TTL_MS).
   */
  async settled(
    db: Database,
    projectId: string,
    origin: string,
    outcome: "delivered" | "failed",
    at: Date,
  ): Promise<void> {
    const known = await this.#fresh(db, projectId, origin, "failingAt");
    if ((outcome === "failed") === (known.failingSince !== null)) return;
    const since = outcome === "failed" ? at.getTime() : null;
    if (since === null)
      await db.run(sql`UPDATE ${webhookReceivers} SET failing_since = NULL
        WHERE project_id = ${projectId} AND origin = ${origin} AND failing_since IS NOT NULL`);
    else
      await db.run(sql`INSERT INTO ${webhookReceivers} (project_id, origin, concurrency, state, failing_since, updated_at)
        SELECT ${projectId}, ${origin}, ${LANE_CONCURRENCY}, 'active', ${since}, ${at.getTime()}
        WHERE EXISTS (SELECT 1 FROM ${projects} WHERE ${projects.id} = ${projectId})
        ON CONFLICT (project_id, origin) DO UPDATE SET failing_since = coalesce(failing_since, excluded.failing_since)`);
    const now = this.#known.get(`${projectId} ${origin}`);
    if (now) now.failingSince = since;
  }
}

const sweptFailed = sql`(${d.status} = 'failed' AND ${d.lastError} IN (${sql.join(
  SWEPT_REASONS.map((r) => sql`${r}`),
  sql`, `,
)}))`;

/**
 * Holds a delivery that was never attempted: `held`, with what a later attempt needs (the body, or
 * its R2 key, and the sealed secret) stored on its record, so resume can hand it to its lane again.
 * Written even when the run path could not write the `pending` row (as a claim would). A delivery
 * already attempted or settled is not held (its attempts go on): false.
 */
export async function holdDelivery(
  db: Database,
  message: DeliveryMessage,
  state: Exclude<ReceiverState, "active">,
  at: Date,
  inLog = false,
): Promise<boolean> {
  // D1 makes the row only while the project exists; a project's log has no `projects` (webhooks/log.ts).
  const exists = inLog ? sql`1` : sql`EXISTS (SELECT 1 FROM ${projects} WHERE ${projects.id} = ${message.projectId})`;
  const body = "inline" in message.body ? message.body.inline : null;
  const bodyKey = "r2" in message.body ? message.body.r2 : null;
  const sealed = message.secret ? JSON.stringify(message.secret) : null;
  const reason = HELD_REASONS[state];
  const rows = await db.all<{ id: string }>(sql`INSERT INTO ${d}
      (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count, last_error, created_at,
       updated_at, body, body_key, sealed_secret, message_id)
    SELECT ${message.id}, ${message.projectId}, ${message.runId}, ${message.endpoint}, ${message.secret ? 1 : 0},
      ${message.bodyBytes}, 'held', 0, ${reason}, ${message.createdAt}, ${at.getTime()}, ${body}, ${bodyKey},
      ${sealed}, ${message.messageId ?? message.id}
    WHERE ${exists}
    ON CONFLICT (id) DO UPDATE SET status = 'held', last_error = excluded.last_error,
      updated_at = excluded.updated_at, completed_at = NULL, body_bytes = excluded.body_bytes,
      body = coalesce(body, excluded.body), body_key = coalesce(body_key, excluded.body_key),
      sealed_secret = coalesce(sealed_secret, excluded.sealed_secret)
    WHERE (status = 'pending' OR ${sweptFailed}) AND attempt_count = 0
    RETURNING id`);
  return rows.length === 1;
}

/**
 * The check at the point a lane takes a delivery for its first attempt: a receiver that is not active
 * gets it held, not attempted (no attempt counted). True when held: the lane forgets it. D1 not
 * answering: the delivery goes on as if the receiver were active (its claim needs D1 anyway).
 */
export async function holdIfStopped(
  ctx: DeliveryContext,
  states: ReceiverStates,
  message: DeliveryMessage,
): Promise<boolean> {
  try {
    return await states.holding(ctx.db, message.projectId, originOf(message.endpoint), async (state) => {
      // Held where it is recorded: its log, or D1 for one recorded there before the logs.
      await ctx.findLog(message);
      const { db } = ctx.log(message);
      return holdDelivery(db, message, state, ctx.deps.now(), db !== ctx.db);
    });
  } catch (error) {
    log("warn", "webhook receiver state not read: the delivery goes on", {
      delivery_id: message.id,
      project_id: message.projectId,
      error,
    });
    return false;
  }
}

/** The actor of the gateway's own audit entries (a receiver that said stop, the failing span). */
const GATEWAY_ACTOR = { actorKind: "operator", actorId: "gateway", actorName: "the gateway" } as const;

/**
 * Disables a receiver (its later deliveries are held) with its cause, once: a receiver already
 * disabled is left as it is and nothing more is written. Each disable leaves an audit entry, is told to
 * the receiver's lanes (`tellLanes`: its other shards stop too) and to the project's alert endpoint
 * (`webhook.receiver.disabled`, alerts.ts). True when this call disabled it.
 */
export async function disableReceiver(
  scope: Pick<Scope, "db" | "deps" | "env">,
  projectId: string,
  origin: string,
  cause: string,
  onDisabled?: (at: Date) => Promise<void>,
): Promise<boolean> {
  const at = scope.deps.now();
  const [row] = await scope.db.all<{
    concurrency: number;
    state_changed_at: number;
  }>(sql`INSERT INTO ${webhookReceivers}
      (project_id, origin, concurrency, state, state_cause, state_changed_at, updated_at)
    SELECT ${projectId}, ${origin}, 6, 'disabled', ${cause}, ${at.getTime()}, ${at.getTime()}
    WHERE EXISTS (SELECT 1 FROM ${projects} WHERE ${projects.id} = ${projectId})
    ON CONFLICT (project_id, origin) DO UPDATE SET state = 'disabled', state_cause = excluded.state_cause,
      state_changed_at = ${STATE_CHANGED_AT}, updated_at = excluded.updated_at
    WHERE state != 'disabled'
    RETURNING concurrency, state_changed_at`);
  if (!row) return false;
  log("warn", "webhook receiver disabled", { project_id: projectId, origin, cause });
  const auditId = newId("aud", at.getTime());
  await scope.db
    .insert(auditLog)
    .values({
      id: auditId,
      projectId,
      ...GATEWAY_ACTOR,
      action: "webhook_receiver.disable",
      targetType: "webhook_receiver",
      targetId: origin,
      details: { cause },
      clientIp: null,
      requestId: auditId,
      at,
    })
    .catch((error: unknown) =>
      log("error", "audit entry not written", { audit_id: auditId, project_id: projectId, error }),
    );
  await tellLanes(scope.env, {
    projectId,
    origin,
    concurrency: row.concurrency,
    state: "disabled",
    stateChangedAt: new Date(row.state_changed_at),
  });
  await onDisabled?.(at);
  return true;
}

/** The cause a receiver's stop is recorded with. */
export function stopCause(sent: { statusCode: number | null }): string {
  return sent.statusCode === 410
    ? "the receiver answered 410 Gone"
    : "the receiver answered with the header webhook-delivery: disable";
}

/** Deliveries held longer than `retentionMs` (their bodies would be purged) end `failed`, each with its reason; at most `limit` per call. */
export async function expireHeld({ db, deps }: Pick<Scope, "db" | "deps">, retentionMs: number, limit = 1000) {
  const now = deps.now();
  const stale = db
    .select({ id: d.id })
    .from(d)
    .where(and(eq(d.status, "held"), lt(d.createdAt, new Date(now.getTime() - retentionMs))))
    .limit(limit);
  const ended = await db
    .update(d)
    .set({ status: "failed", lastError: HELD_PAST_RETENTION, updatedAt: now, completedAt: now })
    .where(and(sql`${d.id} IN ${stale}`, eq(d.status, "held")))
    .returning({ id: d.id, projectId: d.projectId });
  for (const row of ended)
    log("error", "webhook delivery failed", {
      reason: "held longer than the body retention",
      delivery_id: row.id,
      project_id: row.projectId,
    });
  return ended.length;
}
