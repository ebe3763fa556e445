import { DurableObject } from "cloudflare:workers";
import type { Deps } from "../platform/deps";
import { log } from "../platform/log";
import { createScope } from "../platform/scope";
import { type DeliveryContext, newDeliveryContext } from "./attempt/context";
import { deliver, logFailure } from "./deliver";
import { DELIVERIES_PER_LANE_INVOCATION, LANE_CONCURRENCY, LANE_INVOCATION_WALL_MS } from "./lane-capacity";
import type { DeliveryMessage } from "./message";
import { holdIfStopped, ReceiverStates } from "./receiver-controls";

/**
 * A delivery lane: one Durable Object per (project, receiver origin). The queue consumer passes it
 * deliveries (`accept`), which it stores in its SQLite storage before the call returns, and acks at
 * once; the lane makes the attempts on its own, from its alarm. So a receiver that answers after 10 s
 * holds only its own lane: the queue's batches, and every other lane, go on (docs/webhooks.md).
 *
 * Inside a lane: at most LANE_CONCURRENCY deliveries in progress (one connection each), started in
 * order of arrival; a delivery keeps its place from its first attempt to its last, pauses included, so
 * its retries never wait for a neighbour. D1 keeps the attempt count (an attempt is claimed there
 * before its request is sent), so a lane evicted mid-attempt resumes from its storage at the next
 * attempt and never makes a fourth. A row leaves the lane only when its delivery is settled.
 */

/** D1 interrupting one delivery again and again (a refused claim or outcome write): the lane gives it up after this many (the sweeper settles its record). */
const MAX_INTERRUPTIONS = 6;
/** Waits before a delivery is taken up again after its 1st, 2nd … interruption (at least what the delivery asked for). */
const INTERRUPTION_BACKOFF_MS = [1_000, 5_000, 30_000, 60_000, 300_000];
/** A resumed attempt this much after its time is logged (a delayed alarm, an eviction); D1's attempt times show the gap. */
const LATE_MS = 1_000;
/** A row due this soon is waited for inside the alarm rather than by a new one. */
const HOLD_MS = 5_000;
/**
 * An alarm whose lane is empty waits this long for the next `accept` before it ends. Runs hand their
 * deliveries to the lane one at a time (hand-off.ts); without the wait each one would cost an alarm
 * invocation of its own (its alarm set and read in storage, its scope, its D1 writes alone), where the
 * deliveries of a busy second share one alarm and its grouped D1 writes, as a queue batch's did.
 */
const LINGER_MS = 2_000;

interface LaneRow extends Record<string, SqlStorageValue> {
  seq: number;
  id: string;
  message: string;
  due_at: number;
  /** 1 when `due_at` is a next attempt's time (a pause stored for a crash), not the time of arrival. */
  paused: number;
  interruptions: number;
}

const SCHEMA = `CREATE TABLE IF NOT EXISTS lane_deliveries (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  message TEXT NOT NULL,
  due_at INTEGER NOT NULL,
  paused INTEGER NOT NULL DEFAULT 0,
  interruptions INTEGER NOT NULL DEFAULT 0
)`;

/**
 * The lane's storage before `interruptions` had its name: the column was `runs`. Renamed in place
 * when an older lane wakes (its rows are deliveries still to make).
 */
function migrate(sql: SqlStorage): void {
  const columns = sql.exec<{ name: string }>("SELECT name FROM pragma_table_info('lane_deliveries')").toArray();
  if (columns.some((c) => c.name === "runs"))
    sql.exec("ALTER TABLE lane_deliveries RENAME COLUMN runs TO interruptions");
}

/** The lane's logic, apart from the Durable Object class so that it reads as plain code. */
export class Lane {
  readonly #sql: SqlStorage;
  readonly #inFlight = new Set<string>();
  /** Its receiver's state, read at most once a second (a paused or disabled receiver's new deliveries are held). */
  readonly #receivers = new ReceiverStates();
  #pumping = false;
  #wake: (() => void) | undefined;

  constructor(
    private readonly state: DurableObjectState,
    private readonly env: Env,
    private readonly deps: Deps,
  ) {
    this.#sql = state.storage.sql;
    this.#sql.exec(SCHEMA);
    migrate(this.#sql);
  }

  /**
   * Stores `messages` in order (each once: a duplicate adds nothing) and makes sure an alarm or the
   * running one will take them. One call per lane per queue batch.
   */
  async accept(messages: DeliveryMessage[]): Promise<{ stored: boolean[] }> {
    const now = Date.now();
    const stored = messages.map(
      (message) =>
        this.#sql
          .exec(
            "INSERT INTO lane_deliveries (id, message, due_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING seq",
            message.id,
            JSON.stringify(message),
            now,
          )
          .toArray().length === 1,
    );
    if (this.#pumping) this.#wake?.();
    else await this.#arm();
    // The writes are durable before this answer leaves the object (output gate): the consumer may ack.
    return { stored };
  }

  /** Deliveries the lane holds (settled ones leave it), for tests and operators. */
  pending(): { id: string; dueAt: number; interruptions: number }[] {
    return this.#sql
      .exec<{ id: string; due_at: number; interruptions: number }>(
        "SELECT id, due_at, interruptions FROM lane_deliveries ORDER BY seq",
      )
      .toArray()
      .map((r) => ({ id: r.id, dueAt: r.due_at, interruptions: r.interruptions }));
  }

  /** The alarm for the earliest due row (now if it is overdue), unless one at least as early is set. */
  async #arm(): Promise<void> {
    const next = this.#sql.exec<{ at: number | null }>("SELECT min(due_at) AS at FROM lane_deliveries").one().at;
    if (next === null) return;
    const at = Math.max(next, Date.now());
    const current = await this.state.storage.getAlarm();
    if (current === null || current > at) await this.state.storage.setAlarm(at);
  }

  /**
   * The alarm: starts due deliveries in order of arrival while fewer than LANE_CONCURRENCY are in
   * progress, until the lane is empty or nothing is due within HOLD_MS. Bounded per invocation
   * (subrequests, wall time): past either bound it starts nothing new, lets its deliveries in progress
   * finish, and leaves the rest to the next alarm.
   */
  async pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    const began = Date.now();
    let started = 0;
    /** Since when the lane has held nothing (no row, nothing in flight), while the alarm waits for an `accept`. */
    let idleSince: number | null = null;
    const ctx = newDeliveryContext(createScope(this.env, this.state, this.deps));
    try {
      for (;;) {
        const now = Date.now();
        const open = started < DELIVERIES_PER_LANE_INVOCATION && now - began < LANE_INVOCATION_WALL_MS;
        if (open && this.#inFlight.size < LANE_CONCURRENCY) {
          const due = this.#sql
            .exec<LaneRow>(
              "SELECT seq, id, message, due_at, paused, interruptions FROM lane_deliveries WHERE due_at <= ? ORDER BY seq LIMIT ?",
              now,
              LANE_CONCURRENCY + this.#inFlight.size,
            )
            .toArray()
            .filter((row) => !this.#inFlight.has(row.id))
            .slice(0, LANE_CONCURRENCY - this.#inFlight.size);
          for (const row of due) {
            // An alarm the platform delayed (Cloudflare documents up to a minute during failover): the
            // attempts' times in D1 show the gap as it happened; this line says why.
            const lateMs = now - row.due_at;
            if (row.paused === 1 && lateMs > LATE_MS)
              log("warn", "webhook attempt started late", { delivery_id: row.id, late_ms: lateMs });
            started++;
            this.#inFlight.add(row.id);
            void this.#deliver(ctx, row).finally(() => {
              this.#inFlight.delete(row.id);
              this.#wake?.();
            });
          }
        }
        const next = this.#sql
          .exec<{ at: number | null }>(
            "SELECT min(due_at) AS at FROM lane_deliveries WHERE id NOT IN (SELECT value FROM json_each(?))",
            JSON.stringify([...this.#inFlight]),
          )
          .one().at;
        const idle = this.#inFlight.size === 0 && next === null;
        idleSince = idle ? (idleSince ?? now) : null;
        const lingered = idleSince !== null && now - idleSince >= LINGER_MS;
        if (
          this.#inFlight.size === 0 &&
          (lingered || (next !== null && (!open || next - now > HOLD_MS)) || (idle && !open))
        )
          break;
        // Wait for a delivery to end, an `accept`, or the next due row, whichever comes first.
        const waitMs = idle
          ? LINGER_MS - (now - idleSince!)
          : next === null || !open || this.#inFlight.size >= LANE_CONCURRENCY
            ? HOLD_MS
            : Math.max(0, next - now);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, waitMs);
          this.#wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.#wake = undefined;
      }
    } finally {
      // What one alarm did, for operators: its deliveries and the D1 round trips they took (group commit).
      log("info", "webhook lane alarm", {
        deliveries: started,
        d1_trips: ctx.writes.trips,
        d1_statements: ctx.writes.statements,
        duration_ms: Date.now() - began,
      });
      // Same turn as the last look at the table: an `accept` from here on sees no pump and arms the alarm.
      this.#pumping = false;
      this.#wake = undefined;
      await this.#arm();
    }
  }

  /** One delivery's attempts (deliver.ts), and what the lane keeps of it afterwards. */
  async #deliver(ctx: DeliveryContext, row: LaneRow): Promise<void> {
    const message = JSON.parse(row.message) as DeliveryMessage;
    // Taken for its first attempt while its receiver is paused or disabled: held, not attempted.
    if (row.paused === 0 && (await holdIfStopped(ctx, this.#receivers, message))) {
      this.#sql.exec("DELETE FROM lane_deliveries WHERE id = ?", message.id);
      return;
    }
    const end = await deliver(ctx, message, {
      receivers: this.#receivers,
      // Where a crash resumes: the next attempt's time, stored before the pause.
      pausing: (dueAt) =>
        void this.#sql.exec("UPDATE lane_deliveries SET due_at = ?, paused = 1 WHERE id = ?", dueAt, message.id),
    });
    if (end.kind === "settled") {
      this.#sql.exec("DELETE FROM lane_deliveries WHERE id = ?", message.id);
      return;
    }
    const interruptions = row.interruptions + 1;
    if (interruptions >= MAX_INTERRUPTIONS) {
      // D1 has refused this delivery's writes for minutes: the record stays pending and the sweeper settles it.
      this.#sql.exec("DELETE FROM lane_deliveries WHERE id = ?", message.id);
      logFailure(message, 0, "its lane gave up: D1 kept refusing its writes");
      return;
    }
    const delayMs = Math.max(end.ms, INTERRUPTION_BACKOFF_MS[interruptions - 1] ?? 0);
    this.#sql.exec(
      "UPDATE lane_deliveries SET due_at = ?, paused = 0, interruptions = ? WHERE id = ?",
      Date.now() + delayMs,
      interruptions,
      message.id,
    );
  }
}

/**
 * The Durable Object class of the lanes, built from the Worker's `deps` as `createWorker` is (the
 * root exports it, src/index.ts). RPC: `accept(messages)`, `pending()`.
 */
export function webhookLaneClass(deps: Deps) {
  return class WebhookLane extends DurableObject<Env> {
    readonly lane: Lane;

    constructor(state: DurableObjectState, env: Env) {
      super(state, env);
      this.lane = new Lane(state, env, deps);
    }

    accept(messages: DeliveryMessage[]): Promise<{ stored: boolean[] }> {
      return this.lane.accept(messages);
    }

    pending() {
      return this.lane.pending();
    }

    override async alarm(): Promise<void> {
      await this.lane.pump();
    }
  };
}

export type WebhookLaneClass = ReturnType<typeof webhookLaneClass>;
export type WebhookLane = InstanceType<WebhookLaneClass>;
