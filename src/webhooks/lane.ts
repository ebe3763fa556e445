import { DurableObject } from "cloudflare:workers";
import type { Deps } from "../platform/deps";
import { log } from "../platform/log";
import { migrateStorage, type StorageShape } from "../platform/object-storage";
import { createScope } from "../platform/scope";
import { SubrequestMeter } from "../platform/subrequests";
import { type DeliveryContext, DeliveryInProgress, newDeliveryContext } from "./attempt/context";
import { attempt, type AttemptLane, logFailure } from "./deliver";
import {
  type Accepted,
  LANE_BYTES_MAX,
  LANE_CONCURRENCY,
  LANE_INVOCATION_WALL_MS,
  LANE_SUBREQUESTS_PER_INVOCATION,
  SUBREQUESTS_PER_ATTEMPT,
} from "./lane-capacity";
import {
  alarmBudget,
  type AttemptInFlight,
  firstAttemptFits,
  plannedHold,
  plannedRetryHold,
  shardOf,
  shardShares,
} from "./lane-plan";
import { type DeliveryMessage, laneName, laneObject, laneShardName, receiverLaneName, receiverOrigin } from "./message";
import { MAX_ATTEMPTS, MAX_GAP_MS } from "./policy";
import { defaultReceiverSettings, type LaneSettings, type ReceiverSettings } from "./receiver-settings";
import { holdIfStopped, ReceiverStates } from "./receiver-controls";

/**
 * A delivery lane: one Durable Object per (project, receiver origin), and per shard of it when the
 * receiver's concurrency is above what one object may hold open. The queue consumer and the runs pass
 * it deliveries (`accept`), which it stores in its SQLite storage before the call returns; the lane
 * makes the attempts on its own, from its alarm. docs/webhooks.md ("Lanes", "Retries before first
 * attempts", "A receiver's concurrency") has the why of what follows.
 *
 * Inside a lane: at most its share of the receiver's concurrency in requests in flight; a delivery
 * between attempts is a row with its next attempt's time and holds no connection. Retries that are
 * due go first (earliest latest-start first); a first attempt starts only if every retry owed keeps its
 * gap (lane-plan.ts). Concurrency 1 is ordered: the next delivery starts when the one before settled.
 * D1 keeps the attempt count (an attempt is claimed there before its request is sent), so a lane
 * evicted mid-attempt resumes from its storage at the next attempt and never makes a fourth.
 */

/** D1 interrupting one delivery again and again (a refused claim or outcome write): the lane gives it up after this many (the sweeper settles its record). */
const MAX_INTERRUPTIONS = 6;
/** Waits before a delivery is taken up again after its 1st, 2nd … interruption (at least what the delivery asked for). */
const INTERRUPTION_BACKOFF_MS = [1_000, 5_000, 30_000, 60_000, 300_000];
/** The spec's gap less this is a retry's latest start: the alarm's own lateness (timers, a busy core) fits in it. */
export const GAP_MARGIN_MS = 750;
/** A row due this soon is waited for inside the alarm rather than by a new one. */
const HOLD_MS = 5_000;
/**
 * An alarm whose lane is empty waits this long for the next `accept` before it ends, so deliveries
 * handed to it one at a time by runs share one alarm and its grouped D1 writes.
 */
const LINGER_MS = 2_000;
/**
 * From an alarm's end to the next one's start, as the lane plans for it when it lets a retry wait for the
 * next alarm (`#nextAlarmBy`): an alarm set for now starts within milliseconds; a delayed one (failover)
 * can still make a retry late, as it can any delivery between attempts.
 */
const NEXT_ALARM_MS = 1_000;
/** While first attempts wait for the retries' sake, the lane looks again this often (or when an attempt ends). */
const BLOCKED_RECHECK_MS = 100;
/** Beyond the attempt's timeout, what its claim and outcome writes may add to its hold (the plan's ceiling). */
const WRITES_MARGIN_MS = 1_000;
/** The shortest hold the plan assumes, and how many recent holds it looks at. */
const HOLD_FLOOR_MS = 250;
/** The shortest hold the plan assumes for each retry it owes (their sum, not their longest: lane-plan.ts). */
const RETRY_HOLD_FLOOR_MS = 50;
const RECENT_HOLDS = 32;
/**
 * Attempts a lane claims ahead of their slot, per slot: each is claimed in D1 and laid out while the
 * slots' requests are out, and sent the moment one frees, so a slot holds only its request. First
 * attempts are claimed ahead up to this many per slot, and retries, on a count of their own, up to
 * twice as many.
 */
const AHEAD_PER_SLOT = 1;
/**
 * How long before its time a retry is claimed: long enough for its claim's round trip (the group
 * commit's window and D1), so that it is ready when it comes due rather than claimed then while the
 * slot the plan kept for it stands idle. It is sent at its time, not before.
 */
const RETRY_LEAD_MS = 100;
/** How often a pumping lane deletes the rows of the deliveries settled meanwhile (`#settled`), in one write. */
const SETTLED_FLUSH_MS = 250;
/**
 * How long the lane trusts its copy of the receiver's settings when the control plane has not told it of
 * a change (`configure`): a backstop for a change it could not be told.
 */
export const SETTINGS_TTL_MS = 60_000;

/** An attempt under way in its lane, from its claim to its outcome written. */
interface Attempting extends AttemptInFlight {
  /**
   * `claimed`: being claimed and laid out, or waiting for a slot (`startedAt` is its claim's time);
   * `sending`: its request holds a slot (`startedAt` is its send's time); `answered`: its outcome is
   * being written, and it holds no slot.
   */
  phase: "claimed" | "sending" | "answered";
  /** Its row's order of arrival: first attempts take the slots in it. */
  seq: number;
  /** A retry's latest start; null for a first attempt (or an interrupted delivery's). */
  latestAt: number | null;
  /** Its row's time: a retry claimed ahead of it (RETRY_LEAD_MS) waits for it before its send. */
  dueAt: number;
}

/** An attempt claimed and laid out, waiting for its lane's slot. */
interface Waiting {
  attempting: Attempting;
  id: string;
  go: () => void;
}

/** A row as a pick reads it: without its message, read only for the rows it starts (`#messageOf`). */
interface LaneRow extends Record<string, SqlStorageValue> {
  seq: number;
  id: string;
  due_at: number;
  /** 1 when the next attempt is a retry owed within the gap (`latest_at`); 0 for a first attempt or an interrupted delivery. */
  paused: number;
  latest_at: number | null;
  /** Attempts this lane recorded (D1's count is the authority; this says whether a retry may follow). */
  attempts: number;
  interruptions: number;
}

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS lane_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    message TEXT NOT NULL,
    due_at INTEGER NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    interruptions INTEGER NOT NULL DEFAULT 0,
    latest_at INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0
  )`,
  "CREATE INDEX IF NOT EXISTS lane_deliveries_retries ON lane_deliveries (paused, latest_at)",
  // The next row due, without a scan of a backlog of thousands at every turn of the alarm.
  "CREATE INDEX IF NOT EXISTS lane_deliveries_due ON lane_deliveries (paused, due_at)",
  // First attempts in order of arrival (`INDEXED BY` in `#startDue`): by the due index, SQLite sorted
  // every due row of the backlog at each turn (0.5 ms at 8,000 rows against 0.05 ms).
  "CREATE INDEX IF NOT EXISTS lane_deliveries_firsts ON lane_deliveries (paused, seq)",
];

/**
 * Changes to the storage of lanes made before them, in order, each applied once (`migrateStorage`, its
 * version under `lane_meta.schema`, the table where the lane keeps its share and settings too).
 */
const MIGRATIONS: readonly ((sql: SqlStorage) => void)[] = [
  // `interruptions` was `runs`.
  (sql) => {
    const columns = sql.exec<{ name: string }>("SELECT name FROM pragma_table_info('lane_deliveries')").toArray();
    if (columns.some((c) => c.name === "runs"))
      sql.exec("ALTER TABLE lane_deliveries RENAME COLUMN runs TO interruptions");
  },
  // A retry's latest start and the attempts made: pauses became rows (a row with `paused = 1` keeps its gap).
  (sql) => {
    const columns = sql.exec<{ name: string }>("SELECT name FROM pragma_table_info('lane_deliveries')").toArray();
    if (!columns.some((c) => c.name === "latest_at"))
      sql.exec("ALTER TABLE lane_deliveries ADD COLUMN latest_at INTEGER");
    if (!columns.some((c) => c.name === "attempts"))
      sql.exec("ALTER TABLE lane_deliveries ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0");
    // A pause stored by the former lane: owed from its time.
    sql.exec("UPDATE lane_deliveries SET latest_at = due_at + ? WHERE paused = 1", MAX_GAP_MS - GAP_MARGIN_MS);
  },
];

const STORAGE: StorageShape = {
  meta: { table: "lane_meta", value: "TEXT" },
  made: "lane_deliveries",
  schema: SCHEMA,
  steps: MIGRATIONS,
};

/** The receiver's settings as the lane keeps them, and when it read them. */
interface CachedSettings {
  settings: Pick<ReceiverSettings, "projectId" | "origin" | "concurrency" | "state">;
  readAt: number;
}

/** The lane's logic, apart from the Durable Object class so that it reads as plain code. */
export class Lane {
  readonly #sql: SqlStorage;
  /** Deliveries whose attempt is under way, from its claim to its outcome written. */
  readonly #inFlight = new Map<string, Attempting>();
  /**
   * Deliveries settled whose rows are deleted at the next flush (`#flushSettled`), not one write each:
   * out of every pick meanwhile. Why: a write locks the object's output gate until it is confirmed, and
   * every request the lane sends after it waits for that (Cloudflare's output gate; measured here:
   * 3.5 ms added to each attempt that follows a write). Lost in a crash, a row comes back and its
   * claim in D1 finds the delivery settled (the record is the authority): nothing is sent twice. (One
   * its lane gave up on stays pending in D1: it gets its next attempt, within the three.)
   */
  readonly #settled = new Map<string, { paused: boolean }>();
  #flushedAt = Date.now();
  /** Attempts claimed ahead, waiting for a slot: retries go first (earliest latest start), then first attempts in order. */
  #waiting: Waiting[] = [];
  /** How long the lane's last attempts held their slots (ms), newest last. */
  readonly #holds: number[] = [];
  /**
   * Its receiver's state (a paused or disabled receiver's new deliveries are held): told at each change
   * (`configure`, `configureShare`), read again from D1 once a minute at most as a backstop.
   */
  readonly #receivers = new ReceiverStates(() => this.deps.now().getTime());
  /** `concurrency()`, read from `lane_meta` once and again after each write to it. */
  #slots: number | undefined;
  #pumping = false;
  #wake: (() => void) | undefined;
  /**
   * True once the pump found no row for a first attempt left to claim (`#nextDue(0)` null): its turns
   * then skip the reads of first attempts until a row may be there again (a delivery stored, an
   * attempt interrupted, a new alarm). A delivery that reaches an idle lane alone (an async run's) wakes
   * the pump about four times (stored, sent, answered, settled); only the first has a row to find.
   */
  #firstsDrained = false;
  /** `#pausedRows` as last read; null after a write that may change it (a pause, an interruption, a delete of a paused row) and at each alarm. */
  #pausedRowsRead: number | null = null;
  /** How often the pump deletes settled rows (`#settled`); tests raise it to see one write take them all. */
  settledFlushMs = SETTLED_FLUSH_MS;
  /** The bytes past which the lane refuses new deliveries (lane-capacity.ts); tests lower it. */
  bytesMax = LANE_BYTES_MAX;
  /** Subrequests one alarm may make (lane-capacity.ts); tests lower it to cross an alarm's bound quickly. */
  subrequestsPerAlarm = LANE_SUBREQUESTS_PER_INVOCATION;

  constructor(
    private readonly state: DurableObjectState,
    private readonly env: Env,
    private readonly deps: Deps,
  ) {
    this.#sql = state.storage.sql;
    migrateStorage(state.storage, STORAGE);
  }

  /**
   * Stores `messages` in order (each once: a duplicate adds nothing) and makes sure an alarm or the
   * running one will take them. A receiver whose concurrency needs shards: the lane keeps its own share
   * (shard 0) and passes each other delivery to its shard (by delivery id) before it answers, so an
   * answer still means every delivery is stored. One call per lane per queue batch.
   */
  async accept(messages: DeliveryMessage[]): Promise<Accepted> {
    if (messages.length === 0) return { stored: [] };
    if (this.#meta("share") !== null) return this.#store(messages);
    const settings = await this.#settings(messages[0]!);
    const shares = shardShares(settings.concurrency, LANE_CONCURRENCY);
    if (shares.length === 1) return this.#store(messages);
    const lane = laneName(messages[0]!);
    const byShard = new Map<number, number[]>();
    messages.forEach((m, i) => {
      const k = shardOf(m.id, shares.length);
      byShard.set(k, [...(byShard.get(k) ?? []), i]);
    });
    const stored: boolean[] = Array.from({ length: messages.length }, () => false);
    const refused: boolean[] = Array.from({ length: messages.length }, () => false);
    await Promise.all(
      [...byShard].map(async ([k, indexes]) => {
        const mine = indexes.map((i) => messages[i]!);
        const result =
          k === 0
            ? await this.#store(mine)
            : await laneObject(this.env, laneShardName(lane, k)).acceptShard(mine, shares[k]!);
        indexes.forEach((i, j) => {
          stored[i] = result.stored[j]!;
          refused[i] = result.refused?.[j] ?? false;
        });
      }),
    );
    return refused.includes(true) ? { stored, refused } : { stored };
  }

  /** As a shard of a receiver's lane: stores `messages` and keeps `share` as its concurrency. */
  acceptShard(messages: DeliveryMessage[], share: number): Promise<Accepted> {
    this.#keepShare(share);
    return this.#store(messages);
  }

  /**
   * As a shard: its share of the receiver's concurrency, and with a change of the receiver's settings
   * (`told`) its state, from the receiver's first lane (`configure`). Answers once the state is kept and
   * no delivery held on the former one is still being written.
   */
  async configureShare(share: number, told?: LaneSettings): Promise<void> {
    this.#keepShare(share);
    if (!told) return;
    this.#receivers.told(told.projectId, told.origin, told.state, told.stateVersion);
    await this.#receivers.holdsWritten();
  }

  #keepShare(share: number): void {
    if (this.#meta("share") !== String(share)) this.#setMeta("share", String(share));
    this.#wake?.();
  }

  /**
   * The receiver's settings changed (the control plane tells the lane after writing them in D1: a
   * customer's change, a disable): kept at once, and each shard told its share and the state. It answers
   * once every lane of the receiver keeps the new state and no delivery held on the former one is still
   * being written, so that a release after a resume has nothing more to wait for (receiver-tasks.ts).
   * Shards beyond the new count keep one request in flight until their backlog is drained (a change of
   * concurrency applies to deliveries accepted after it); they are told the state all the same.
   */
  async configure(settings: LaneSettings): Promise<void> {
    const { projectId, origin, concurrency, state, stateVersion } = settings;
    // Told two changes out of order (the later one reached the lane first): the later one stands.
    if (!this.#receivers.told(projectId, origin, state, stateVersion)) return;
    const shards = this.#keepSettings({ projectId, origin, concurrency, state });
    const lane = receiverLaneName(projectId, origin);
    const shares = shardShares(concurrency, LANE_CONCURRENCY);
    await Promise.all([
      ...Array.from({ length: shards - 1 }, (_, i) =>
        laneObject(this.env, laneShardName(lane, i + 1)).configureShare(shares[i + 1] ?? 1, settings),
      ),
      this.#receivers.holdsWritten(),
    ]);
    this.#wake?.();
  }

  /**
   * Deliveries the lane holds (settled ones leave it), for tests and operators. It writes (the settled
   * rows' delete): a call while attempts go out makes the next one wait for that write.
   */
  pending(): { id: string; dueAt: number; interruptions: number }[] {
    this.#flushSettled();
    return this.#sql
      .exec<{ id: string; due_at: number; interruptions: number }>(
        "SELECT id, due_at, interruptions FROM lane_deliveries ORDER BY seq",
      )
      .toArray()
      .map((r) => ({ id: r.id, dueAt: r.due_at, interruptions: r.interruptions }));
  }

  /** The requests this lane may have in flight: its share as a shard, or shard 0's share of its receiver's concurrency. */
  concurrency(): number {
    if (this.#slots !== undefined) return this.#slots;
    const share = this.#meta("share");
    const cached = share === null ? this.#cached() : null;
    this.#slots =
      share !== null
        ? Number(share)
        : shardShares(cached?.settings.concurrency ?? LANE_CONCURRENCY, LANE_CONCURRENCY)[0]!;
    return this.#slots;
  }

  async #store(messages: DeliveryMessage[]): Promise<Accepted> {
    // Settled rows go first, in the same commit as these: a delivery released after its lane held it comes
    // back with its id, and must find its row gone, not count as a duplicate (receiver-tasks.ts).
    this.#flushSettled();
    // Full (LANE_BYTES_MAX): nothing more is stored, and the answer says so (`acceptInLane` throws it
    // on the caller's side: thrown here, it would also be the object's uncaught exception). A copy of a
    // delivery the lane holds is a duplicate, as ever, not a refusal: it is not to be settled failed.
    const bytes = this.#sql.databaseSize;
    if (bytes >= this.bytesMax) {
      const refused = messages.map(
        (m) => this.#sql.exec("SELECT 1 FROM lane_deliveries WHERE id = ?", m.id).toArray().length === 0,
      );
      log("warn", "webhook lane full: deliveries refused", {
        lane_id: this.state.id.toString(),
        bytes,
        refused: refused.filter(Boolean).length,
      });
      const stored = messages.map(() => false);
      return refused.includes(true) ? { stored, refused } : { stored };
    }
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
    if (stored.includes(true)) this.#firstsDrained = false;
    if (this.#pumping) this.#wake?.();
    else await this.#arm();
    // The writes are durable before this answer leaves the object (output gate): the consumer may ack.
    return { stored };
  }

  #meta(key: string): string | null {
    return (
      this.#sql.exec<{ value: string }>("SELECT value FROM lane_meta WHERE key = ?", key).toArray()[0]?.value ?? null
    );
  }

  #setMeta(key: string, value: string): void {
    this.#slots = undefined;
    this.#sql.exec(
      "INSERT INTO lane_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      key,
      value,
    );
  }

  #cached(): CachedSettings | null {
    const value = this.#meta("settings");
    return value === null ? null : (JSON.parse(value) as CachedSettings);
  }

  /**
   * Keeps the receiver's settings (told or read) as the lane's copy, and returns how many lanes the
   * receiver has had (`shards`, the most its concurrency ever asked for): a shard that a lower
   * concurrency no longer uses may still hold deliveries, so it is told the state too.
   */
  #keepSettings(settings: CachedSettings["settings"]): number {
    const before = this.#cached();
    const shards = Math.max(
      Number(this.#meta("shards") ?? 1),
      shardShares(before?.settings.concurrency ?? 1, LANE_CONCURRENCY).length,
      shardShares(settings.concurrency, LANE_CONCURRENCY).length,
    );
    this.#setMeta("settings", JSON.stringify({ settings, readAt: Date.now() } satisfies CachedSettings));
    if (this.#meta("shards") !== String(shards)) this.#setMeta("shards", String(shards));
    return shards;
  }

  /**
   * The receiver's settings: the lane's copy, read again from D1 when it is older than SETTINGS_TTL_MS
   * (one read per lane a minute at most, never one per delivery; the same read refreshes its copy of the
   * receiver's state). D1 unreachable: the copy, or the defaults.
   */
  async #settings(message: Pick<DeliveryMessage, "projectId" | "endpoint">): Promise<CachedSettings["settings"]> {
    const cached = this.#cached();
    if (cached && Date.now() - cached.readAt < SETTINGS_TTL_MS) return cached.settings;
    const origin = receiverOrigin(message.endpoint);
    try {
      const { projectId, concurrency, state } = await this.#receivers.read(
        createScope(this.env, this.state, this.deps).db,
        message.projectId,
        origin,
      );
      const settings = { projectId, origin, concurrency, state };
      this.#keepSettings(settings);
      return settings;
    } catch (error) {
      log("warn", "webhook receiver settings not read: the lane keeps its copy", {
        project_id: message.projectId,
        origin,
        error,
      });
      return cached?.settings ?? defaultReceiverSettings(message.projectId, origin);
    }
  }

  /**
   * The alarm for the earliest due row (now if it is overdue), unless one at least as early is set. While
   * the retries owed need more than a whole alarm's subrequests, the earliest retry's: an alarm for a first
   * attempt would start nothing and end, again and again.
   */
  async #arm(): Promise<void> {
    const where = this.#freshAlarmOpens() ? "" : " WHERE paused = 1";
    const next = this.#sql
      .exec<{ at: number | null }>(`SELECT min(due_at) AS at FROM lane_deliveries${where}`)
      .one().at;
    if (next === null) return;
    const at = Math.max(next, Date.now());
    const current = await this.state.storage.getAlarm();
    if (current === null || current > at) await this.state.storage.setAlarm(at);
  }

  /** Rows not in flight, as the lane picks them: `sql` after WHERE, with its parameters. */
  #rows(where: string, ...params: SqlStorageValue[]): LaneRow[] {
    return this.#rowsFrom("lane_deliveries", where, ...params);
  }

  /**
   * `#rows`, from `from`: the table, or the table with the index it must use named. A pick reads past
   * the rows in flight and those settled and not deleted yet (tens in a burst) at every wake, so it
   * leaves out their messages (each a delivery's whole body when it fits inline): only the rows it starts
   * are read whole.
   */
  #rowsFrom(from: string, where: string, ...params: SqlStorageValue[]): LaneRow[] {
    return this.#sql
      .exec<LaneRow>(
        `SELECT seq, id, due_at, paused, latest_at, attempts, interruptions FROM ${from} WHERE ${where}`,
        ...params,
      )
      .toArray()
      .filter((row) => !this.#inFlight.has(row.id) && !this.#settled.has(row.id));
  }

  /** The message of a row a pick read; null when the row is gone (nothing deletes a row in flight). */
  #messageOf(row: LaneRow): DeliveryMessage | null {
    const [found] = this.#sql
      .exec<{ message: string }>("SELECT message FROM lane_deliveries WHERE seq = ?", row.seq)
      .toArray();
    return found ? (JSON.parse(found.message) as DeliveryMessage) : null;
  }

  /** Rows a pick may find and drop: those in flight and those settled and not deleted yet. */
  #unpickable(): number {
    return this.#inFlight.size + this.#settled.size;
  }

  /** Deletes the rows of settled deliveries in one statement: at once, or (`always` false) once `settledFlushMs` has passed since the last. */
  #flushSettled(always = true): void {
    if (this.#settled.size === 0 || (!always && Date.now() - this.#flushedAt < this.settledFlushMs)) return;
    const ids = [...this.#settled.keys()];
    if ([...this.#settled.values()].some((s) => s.paused)) this.#pausedRowsRead = null;
    // SQLite's 100 bound parameters per statement on Cloudflare: in slices.
    for (let i = 0; i < ids.length; i += 100) {
      const slice = ids.slice(i, i + 100);
      this.#sql.exec(`DELETE FROM lane_deliveries WHERE id IN (${slice.map(() => "?").join(", ")})`, ...slice);
    }
    this.#settled.clear();
    this.#flushedAt = Date.now();
  }

  /** A delivery that leaves the lane: out of every pick at once, its row deleted at the next flush. */
  #settle(row: LaneRow): void {
    this.#settled.set(row.id, { paused: row.paused === 1 });
  }

  /**
   * Claims what may start soon, within `budget` attempts: retries due within RETRY_LEAD_MS (at once when
   * the alarm is closed, and then only those that cannot wait for the next alarm: `urgentBefore`),
   * earliest latest-start first, then first attempts in order of arrival, as many as the slots and
   * AHEAD_PER_SLOT allow (the gate, `#openGate`, sends them); at concurrency 1, the oldest delivery once
   * nothing else is unsettled. Returns how many it claimed and whether the ordered head waits for the
   * one before it.
   */
  #startDue(
    ctx: DeliveryContext,
    now: number,
    budget: { retries: number; firsts: number },
    /**
     * Closed to first attempts (not `undefined`): retries as they come due, with no lead; when a number,
     * only those whose latest start comes before it (the next alarm's, `#nextAlarmBy`).
     */
    urgentBefore?: number | null,
  ): { started: number; blocked: boolean } {
    const slots = this.concurrency();
    let started = 0;
    const start = (row: LaneRow) => {
      started++;
      this.#start(ctx, row, now);
    };
    if (slots === 1) {
      // Ordered: the oldest delivery only, its retries included; the next one's first attempt waits for it to settle.
      if (this.#inFlight.size > 0) return { started, blocked: false };
      const [head] = this.#rows("1 = 1 ORDER BY seq LIMIT ?", this.#unpickable() + 1);
      if (!head) return { started, blocked: false };
      if (head.due_at <= now && (head.paused === 1 ? budget.retries : budget.firsts) > 0) start(head);
      return { started, blocked: started === 0 };
    }
    // Claimed ahead of their slots (the gate, `#openGate`, sends them), each kind on its own count, so
    // that retries being claimed never leave the next free slot without a first attempt ready for it.
    const retryRoom = Math.min(2 * AHEAD_PER_SLOT * slots - this.#claimedAhead(true), budget.retries);
    // No row between attempts (`#pausedRows`): no read of retries.
    if (retryRoom > 0 && this.#pausedRows() > 0)
      for (const row of this.#rows(
        "paused = 1 AND due_at <= ? AND (latest_at IS NULL OR latest_at <= ?) ORDER BY latest_at LIMIT ?",
        urgentBefore === undefined ? now + RETRY_LEAD_MS : now,
        urgentBefore ?? Number.MAX_SAFE_INTEGER,
        retryRoom + this.#unpickable(),
      ).slice(0, retryRoom))
        start(row);
    const retriesStarted = started;
    const firstRoom = () =>
      Math.min(
        AHEAD_PER_SLOT * slots - this.#claimedAhead(false),
        budget.retries - started,
        budget.firsts - (started - retriesStarted),
      );
    if (firstRoom() > 0 && !this.#firstsDrained)
      for (const row of this.#rowsFrom(
        "lane_deliveries INDEXED BY lane_deliveries_firsts",
        "paused = 0 AND due_at <= ? ORDER BY seq LIMIT ?",
        now,
        firstRoom() + this.#unpickable(),
      ).slice(0, firstRoom()))
        start(row);
    return { started, blocked: false };
  }

  /**
   * Gives free slots to the attempts waiting for one: retries first (each once its time has come: one
   * claimed ahead of it waits), earliest latest start first; then first attempts in order of arrival,
   * each only if every retry owed still keeps its gap with it (lane-plan.ts). Returns whether a first
   * attempt waits for the retries' sake.
   */
  #openGate(ctx: DeliveryContext): boolean {
    const slots = this.concurrency();
    const now = Date.now();
    while (this.#waiting.length > 0 && this.#requests().length < slots) {
      let next = -1;
      for (let i = 0; i < this.#waiting.length; i++) {
        const a = this.#waiting[i]!.attempting;
        // A retry claimed ahead of its time waits for it (the pump wakes then: `#nextWaiting`).
        if (a.dueAt > now) continue;
        const b = next === -1 ? undefined : this.#waiting[next]!.attempting;
        const earlier =
          b === undefined ||
          (a.latestAt !== null ? b.latestAt === null || a.latestAt < b.latestAt : b.latestAt === null && a.seq < b.seq);
        if (earlier) next = i;
      }
      if (next === -1) return false;
      const { attempting, id, go } = this.#waiting[next]!;
      if (attempting.latestAt === null && slots > 1 && !this.#firstFits(ctx, now, attempting.mayRetry)) return true;
      this.#waiting.splice(next, 1);
      // An alarm the platform delayed (Cloudflare documents up to a minute during failover), or a retry
      // the lane could not place in time: the attempts' times in D1 show the gap; this line says why.
      if (attempting.latestAt !== null && now > attempting.latestAt)
        log("warn", "webhook attempt started late", { delivery_id: id, late_ms: now - attempting.latestAt });
      attempting.phase = "sending";
      attempting.startedAt = now;
      go();
    }
    return false;
  }

  /** Whether a first attempt may take a free slot now without making a retry owed late (lane-plan.ts). */
  #firstFits(ctx: DeliveryContext, now: number, mayRetry: boolean): boolean {
    // No row owed a retry (`#pausedRows`, kept until a write changes it): nothing to read.
    const owed =
      this.#pausedRows() === 0
        ? []
        : this.#sql
            .exec<{ id: string; due_at: number; latest_at: number }>(
              "SELECT id, due_at, latest_at FROM lane_deliveries WHERE paused = 1 AND latest_at IS NOT NULL",
            )
            .toArray();
    const retries = owed
      .filter((r) => !this.#inFlight.has(r.id) && !this.#settled.has(r.id))
      .map((r) => ({ dueAt: r.due_at, latestAt: r.latest_at }));
    for (const a of this.#inFlight.values()) {
      // Retries being claimed: owed a slot by their latest start.
      if (a.phase === "claimed" && a.latestAt !== null)
        retries.push({ dueAt: Math.max(now, a.dueAt), latestAt: a.latestAt });
      // Answered attempts still writing their outcome hold no slot, but each may end in a retry owed from now.
      if (a.phase === "answered" && a.mayRetry)
        retries.push({ dueAt: now, latestAt: now + MAX_GAP_MS - GAP_MARGIN_MS });
    }
    return firstAttemptFits(
      {
        now,
        slots: this.concurrency(),
        holdMs: this.#plannedHold(now, ctx),
        retryHoldMs: plannedRetryHold(this.#holds, RETRY_HOLD_FLOOR_MS, ctx.config.webhookTimeoutMs + WRITES_MARGIN_MS),
        gapMs: MAX_GAP_MS - GAP_MARGIN_MS,
        inFlight: this.#requests(),
        retries,
      },
      mayRetry,
    );
  }

  #plannedHold(now: number, ctx: DeliveryContext): number {
    let oldest = 0;
    for (const a of this.#requests()) oldest = Math.max(oldest, now - a.startedAt);
    return plannedHold(this.#holds, oldest, HOLD_FLOOR_MS, ctx.config.webhookTimeoutMs + WRITES_MARGIN_MS);
  }

  #start(ctx: DeliveryContext, row: LaneRow, now: number): void {
    const attempting: Attempting = {
      phase: "claimed",
      startedAt: now,
      mayRetry: row.attempts + 1 < MAX_ATTEMPTS,
      seq: row.seq,
      latestAt: row.paused === 1 ? row.latest_at : null,
      dueAt: row.due_at,
    };
    this.#inFlight.set(row.id, attempting);
    const slot = () =>
      new Promise<void>((go) => {
        this.#waiting.push({ attempting, id: row.id, go });
        this.#openGate(ctx);
        // The pump looks again: sent, its place ahead is free for the next claim; not, an answer or the
        // plan's recheck opens the gate.
        this.#wake?.();
      });
    // The slot is the request's: from its send to the receiver's answer. The claim before it and the
    // outcome's write after it go on without one (a D1 write is not a connection to the receiver).
    // Relied on: Cloudflare's 6 simultaneous connections per invocation count fetch, KV, Cache, R2,
    // Queues and sockets, not D1 calls; the group commit sends those writes as one batch besides.
    const answered = () => {
      if (attempting.phase === "answered") return;
      if (attempting.phase === "sending") {
        this.#holds.push(Date.now() - attempting.startedAt);
        if (this.#holds.length > RECENT_HOLDS) this.#holds.shift();
      }
      attempting.phase = "answered";
      this.#openGate(ctx);
      this.#wake?.();
    };
    void this.#attempt(ctx, row, { receivers: this.#receivers, slot, answered }).finally(() => {
      answered();
      this.#inFlight.delete(row.id);
      this.#wake?.();
    });
  }

  /** The attempts whose request holds a slot: sent, not answered yet. */
  #requests(): AttemptInFlight[] {
    return [...this.#inFlight.values()].filter((a) => a.phase === "sending");
  }

  /**
   * The attempts the lane's deliveries under way may still make: at most two more for each one between
   * attempts or in flight (MAX_ATTEMPTS in all). What an alarm keeps of its budget for them.
   */
  #owedAttempts(): number {
    let between = this.#pausedRows();
    for (const { paused } of this.#settled.values()) if (paused) between--;
    return (MAX_ATTEMPTS - 1) * (between + this.#inFlight.size);
  }

  /**
   * The rows between attempts (`paused` = 1), settled ones not deleted yet included: read once, and
   * again after a write that may change it (`#pausedRowsRead` null). At 0 (a receiver that answers) the
   * pump's turns and a first attempt's check skip the reads of retries. Profiled, the pump's reads (five a turn,
   * each past the rows in flight) were the largest cost of a delivery that reaches an idle lane alone, as
   * an async run's does: 2.5 ms of SQLite per delivery, 1 ms for a synchronous run's; with this and
   * `#firstsDrained`, 0.4 and 0.3 ms.
   */
  #pausedRows(): number {
    return (this.#pausedRowsRead ??= this.#sql
      .exec<{ n: number }>("SELECT count(*) AS n FROM lane_deliveries WHERE paused = 1")
      .one().n);
  }

  /**
   * The alarm: starts what is due (`#startDue`) until the lane is empty or nothing is due within
   * HOLD_MS. Bounded per invocation (subrequests as made, wall time), and its end never makes a retry
   * miss its gap: near either bound it closes to first attempts for good (what is left of the
   * subrequests is kept for the retries owed), starts only the retries that cannot wait for the next
   * alarm (`#nextAlarmBy`), and ends at the first moment nothing is in flight, with the next alarm set
   * (at once when something is due).
   */
  async pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    this.#firstsDrained = false;
    this.#pausedRowsRead = null;
    const began = Date.now();
    let started = 0;
    /** Since when the lane has held nothing (no row, nothing in flight), while the alarm waits for an `accept`. */
    let idleSince: number | null = null;
    let closed = false;
    let freshOpens: boolean | undefined;
    // The alarm's subrequests as it makes them: its budget is what is left of the limit, less the worst
    // case of each attempt in flight, not the worst case of every attempt made (lane-capacity.ts).
    const meter = new SubrequestMeter();
    const ctx = newDeliveryContext(createScope(meter.env(this.env), this.state, meter.deps(this.deps)));
    try {
      await this.#refreshSettings();
      for (;;) {
        this.#flushSettled(false);
        const now = Date.now();
        const budget = alarmBudget(
          attemptsLeft(this.subrequestsPerAlarm - meter.made, this.#inFlight.size),
          this.#owedAttempts(),
          now - began < LANE_INVOCATION_WALL_MS,
          MAX_ATTEMPTS,
        );
        // Once closed to first attempts, the alarm stays closed: it is ending. Reopened each time an attempt's
        // worst case was given back, it let a few first attempts in at a time and kept ending for seconds.
        closed ||= budget.firsts === 0;
        const open = !closed;
        // Ending early for a fresh alarm's budget helps only if that budget would open first attempts: a
        // lane whose retries owed need more than a whole alarm starts its retries as they come due.
        if (!open && freshOpens === undefined) freshOpens = this.#freshAlarmOpens();
        let blocked = false;
        if (budget.retries > 0) {
          const step = open
            ? this.#startDue(ctx, now, budget)
            : this.#startDue(ctx, now, { ...budget, firsts: 0 }, freshOpens ? this.#nextAlarmBy(ctx, now) : null);
          started += step.started;
          blocked = step.blocked;
        }
        // Slots freed since the last look: given to the attempts claimed ahead (and the plan looked at again).
        blocked = this.#openGate(ctx) || blocked;
        // The next retry's time: a row's, less the lead it is claimed with (none when ordered or closed),
        // while the lane has room to claim retries ahead; or that of one claimed ahead and waiting for it.
        // The next first row's only while the lane has room to claim first attempts ahead (a landed claim
        // wakes it): waiting for a row it cannot claim yet was a spin.
        const slots = this.concurrency();
        const lead = open && slots > 1 ? RETRY_LEAD_MS : 0;
        const retryRow =
          this.#pausedRows() > 0 && this.#claimedAhead(true) < 2 * AHEAD_PER_SLOT * slots ? this.#nextDue(1) : null;
        const nextRetry = earliest(retryRow === null ? null : retryRow - lead, this.#nextWaiting(now));
        const firstsLooked = !this.#firstsDrained && this.#claimedAhead(false) < AHEAD_PER_SLOT * slots;
        const nextFirst = firstsLooked ? this.#nextDue(0) : null;
        if (firstsLooked && nextFirst === null) this.#firstsDrained = true;
        const next = nextRetry === null ? nextFirst : nextFirst === null ? nextRetry : Math.min(nextRetry, nextFirst);
        const idle = this.#inFlight.size === 0 && next === null;
        idleSince = idle ? (idleSince ?? now) : null;
        const lingered = idleSince !== null && now - idleSince >= LINGER_MS;
        if (
          this.#inFlight.size === 0 &&
          (lingered || (next !== null && (!open || next - now > HOLD_MS)) || (idle && !open))
        )
          break;
        // Wait for an attempt to end, an `accept`, or the next due row, whichever comes first.
        const full = this.#requests().length >= slots;
        // Full, or nothing more to start (the subrequests spent): an attempt's end wakes the lane. Blocked (first attempts wait for the retries' sake, or for
        // the delivery before them at concurrency 1): the next retry's time, or a look again shortly.
        // Closed to first attempts (its bounds near): a look again shortly, for retries that cannot wait for
        // the next alarm (`#nextAlarmBy`); the alarm ends once nothing is in flight.
        const waitMs = idle
          ? LINGER_MS - (now - idleSince!)
          : full || budget.retries === 0
            ? HOLD_MS
            : !open
              ? freshOpens
                ? BLOCKED_RECHECK_MS
                : Math.max(0, Math.min(HOLD_MS, (nextRetry ?? Infinity) - now))
              : next === null
                ? HOLD_MS
                : blocked
                  ? Math.max(0, Math.min(BLOCKED_RECHECK_MS, (nextRetry ?? Infinity) - now))
                  : Math.max(0, next - now);
        // Settled rows wait at most `settledFlushMs` for their delete, whatever else the lane waits for.
        const flushIn = this.#settled.size > 0 ? Math.max(0, this.settledFlushMs - (now - this.#flushedAt)) : Infinity;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(waitMs, flushIn));
          this.#wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.#wake = undefined;
      }
    } finally {
      // What one alarm did, for operators: its attempts and the D1 round trips they took (group commit).
      log("info", "webhook lane alarm", {
        lane_id: this.state.id.toString(),
        attempts: started,
        subrequests: meter.made,
        d1_trips: ctx.groups().reduce((n, g) => n + g.trips, 0),
        d1_statements: ctx.groups().reduce((n, g) => n + g.statements, 0),
        duration_ms: Date.now() - began,
      });
      // Same turn as the last look at the table: an `accept` from here on sees no pump and arms the alarm.
      this.#pumping = false;
      this.#wake = undefined;
      this.#flushSettled();
      await this.#arm();
    }
  }

  /**
   * Closed to first attempts, the alarm ends at the first moment nothing is in flight and the next one
   * starts at once: by the end of the longest hold planned for what is in flight, and NEXT_ALARM_MS.
   * A retry whose latest start comes after that waits for the next alarm rather than keep this one
   * (and its slots, idle but for the retries) going while more retries come due.
   */
  #nextAlarmBy(ctx: DeliveryContext, now: number): number {
    const hold = this.#plannedHold(now, ctx);
    let end = now;
    for (const a of this.#inFlight.values())
      end = Math.max(end, a.phase === "sending" ? a.startedAt + hold : now + hold);
    return end + NEXT_ALARM_MS;
  }

  /** Whether an alarm starting now, its subrequests all left, would open first attempts beside the retries owed. */
  #freshAlarmOpens(): boolean {
    return alarmBudget(attemptsLeft(this.subrequestsPerAlarm, 0), this.#owedAttempts(), true, MAX_ATTEMPTS).firsts > 0;
  }

  /** Attempts claimed and not sent yet: retries (`true`) or first attempts. */
  #claimedAhead(retries: boolean): number {
    let n = 0;
    for (const a of this.#inFlight.values()) if (a.phase === "claimed" && (a.latestAt !== null) === retries) n++;
    return n;
  }

  /** The earliest time of a retry claimed ahead that waits for it (after `now`), or null. */
  #nextWaiting(now: number): number | null {
    let at: number | null = null;
    for (const { attempting } of this.#waiting)
      if (attempting.dueAt > now) at = at === null ? attempting.dueAt : Math.min(at, attempting.dueAt);
    return at;
  }

  /** The earliest `due_at` of the rows with `paused` = `paused` that are not in flight (the index, not a scan). */
  #nextDue(paused: 0 | 1): number | null {
    const [row] = this.#rows("paused = ? ORDER BY due_at LIMIT ?", paused, this.#unpickable() + 1);
    return row ? row.due_at : null;
  }

  /** A receiver's first lane whose copy of the settings is stale reads them again (one D1 read). */
  async #refreshSettings(): Promise<void> {
    if (this.#meta("share") !== null) return;
    const cached = this.#cached();
    if (cached && Date.now() - cached.readAt < SETTINGS_TTL_MS) return;
    const [row] = this.#rows("1 = 1 ORDER BY seq LIMIT ?", this.#unpickable() + 1);
    const message = row ? this.#messageOf(row) : null;
    if (message) await this.#settings(message);
  }

  /** One attempt of a delivery (deliver.ts), and what the lane keeps of it afterwards. */
  async #attempt(ctx: DeliveryContext, row: LaneRow, lane: Required<AttemptLane>): Promise<void> {
    const message = this.#messageOf(row);
    if (message === null) {
      this.#settle(row);
      return;
    }
    // Taken for its first attempt while its receiver is paused or disabled: held, not attempted.
    if (row.attempts === 0 && (await holdIfStopped(ctx, this.#receivers, message))) {
      this.#settle(row);
      return;
    }
    const delivery = new DeliveryInProgress(message);
    const end = await attempt(ctx, delivery, lane).finally(() => delivery.release());
    if (end.kind === "settled") {
      this.#settle(row);
      return;
    }
    if (end.kind === "pause") {
      this.#pausedRowsRead = null;
      // Where a crash resumes, and what the plan owes: the next attempt's time and its latest start.
      this.#sql.exec(
        "UPDATE lane_deliveries SET due_at = ?, latest_at = ?, paused = 1, attempts = attempts + 1 WHERE id = ?",
        end.dueAt,
        end.endedAt + MAX_GAP_MS - GAP_MARGIN_MS,
        message.id,
      );
      return;
    }
    const interruptions = row.interruptions + 1;
    if (interruptions >= MAX_INTERRUPTIONS) {
      // D1 has refused this delivery's writes for minutes: the record stays pending and the sweeper settles it.
      this.#settle(row);
      logFailure(message, 0, "its lane gave up: D1 kept refusing its writes");
      return;
    }
    const delayMs = Math.max(end.ms, INTERRUPTION_BACKOFF_MS[interruptions - 1] ?? 0);
    this.#firstsDrained = false;
    this.#pausedRowsRead = null;
    this.#sql.exec(
      "UPDATE lane_deliveries SET due_at = ?, paused = 0, latest_at = NULL, interruptions = ? WHERE id = ?",
      Date.now() + delayMs,
      interruptions,
      message.id,
    );
  }
}

/**
 * The Durable Object class of the lanes, built from the Worker's `deps` as `createWorker` is (the
 * root exports it, src/index.ts). RPC: `accept(messages)`, `pending()`, `configure(settings)`, and
 * between a receiver's first lane and its shards `acceptShard`, `configureShare`.
 */
export function webhookLaneClass(deps: Deps) {
  return class WebhookLane extends DurableObject<Env> {
    readonly lane: Lane;

    constructor(state: DurableObjectState, env: Env) {
      super(state, env);
      this.lane = new Lane(state, env, deps);
    }

    accept(messages: DeliveryMessage[]): Promise<Accepted> {
      return this.lane.accept(messages);
    }

    acceptShard(messages: DeliveryMessage[], share: number): Promise<Accepted> {
      return this.lane.acceptShard(messages, share);
    }

    configureShare(share: number, told?: LaneSettings): Promise<void> {
      return this.lane.configureShare(share, told);
    }

    configure(settings: LaneSettings): Promise<void> {
      return this.lane.configure(settings);
    }

    pending() {
      return this.lane.pending();
    }

    override async alarm(): Promise<void> {
      await this.lane.pump();
    }
  };
}

/**
 * The attempts an alarm may still start with `subrequests` left of its limit: each at its worst case
 * (SUBREQUESTS_PER_ATTEMPT), after the worst case of each attempt `inFlight` and the one subrequest kept
 * for the receiver's settings.
 */
export const attemptsLeft = (subrequests: number, inFlight: number): number =>
  Math.max(0, Math.floor((subrequests - 1 - SUBREQUESTS_PER_ATTEMPT * inFlight) / SUBREQUESTS_PER_ATTEMPT));

const earliest = (a: number | null, b: number | null): number | null =>
  a === null ? b : b === null ? a : Math.min(a, b);

export type WebhookLaneClass = ReturnType<typeof webhookLaneClass>;
export type WebhookLane = InstanceType<WebhookLaneClass>;
