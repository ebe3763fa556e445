import { DurableObject } from "cloudflare:workers";
import { createDb, type Database } from "../db/client";
import type { Deps } from "../platform/deps";
import { log } from "../platform/log";
import { d1Over, runSql, type SqlAnswer, type SqlCall } from "../platform/object-d1";
import { migrateStorage } from "../platform/object-storage";
import { getConfig } from "../platform/env";
import { createScope, type Scope } from "../platform/scope";
import { STALE_AFTER_MS, sweepStalled } from "./housekeeping";
import { DELIVERY_LOG_STORAGE, type LogCallOptions } from "./log";
import { expireHeld } from "./receiver-controls";
import { BODY_SLICE_MAX, deleteRecords, purgeBodies } from "./retention";

/**
 * A log's bytes past which it takes no new delivery (`grows` calls refused: `DeliveryLogFullError`): an
 * object's SQLite storage holds 10 GB, and the claims and outcomes of the deliveries it has still need
 * room. Its retention frees room continuously (below), so a log is full only when a project sends more
 * than its shard can keep for the retention (docs/architecture.md: ≈ 8 GiB / 30 days of records).
 */
export const DELIVERY_LOG_BYTES_MAX = 8 * 1024 ** 3;

/** Rows each retention step takes per alarm; a step that took a full slice brings the next alarm in `SLICE_GAP_MS`. */
export const RETENTION_SLICE = BODY_SLICE_MAX;
export const SLICE_GAP_MS = 1_000;
/** After a failed alarm: its retention is tried again this much later. */
export const RETRY_MS = 30_000;

type LogAnswer = { answers: SqlAnswer[] } | { full: true };

/**
 * The Durable Object class of the delivery logs (one per project and shard, `deliveryLogName`), built from
 * the Worker's `deps` as the lanes are. It answers the statements of the delivery code (`sql`, through
 * `deliveryLogDb`) and keeps its own retention by alarm, in slices, as D1's crons did for D1: deliveries
 * left pending past `STALE_AFTER_MS` settled failed, held ones past the body retention failed, bodies and
 * sealed secrets purged after `WEBHOOK_BODY_RETENTION_DAYS`, records and attempts deleted after
 * `WEBHOOK_RECORD_RETENTION_DAYS`. The alarm is set for the earliest of these whenever a call writes and
 * none is set, so an idle log sleeps until its next due row.
 */
export function deliveryLogClass(deps: Deps) {
  return class DeliveryLog extends DurableObject<Env> {
    /** Public for tests, which lower it to reach the rule past it. */
    bytesMax = DELIVERY_LOG_BYTES_MAX;
    /** Whether its alarm runs its retention (`OBJECT_SWEEPS`): always but in tests, which run it with their own clock. */
    retainsByAlarm: boolean;
    /** When the alarm is set for, as this instance set it (null: not known to be set). */
    #alarmAt: number | null = null;
    readonly #db: Database;

    constructor(ctx: DurableObjectState, env: Env) {
      super(ctx, env);
      migrateStorage(ctx.storage, DELIVERY_LOG_STORAGE);
      this.retainsByAlarm = getConfig(env).objectSweeps === "alarm";
      this.#db = createDb(d1Over(async (calls) => runSql(ctx.storage, calls)));
    }

    /** Runs the statements of one D1 call (a batch: one transaction); a `grows` call is refused past the bound. */
    async sql(calls: SqlCall[], options: LogCallOptions = {}): Promise<LogAnswer> {
      if (options.grows && this.ctx.storage.sql.databaseSize > this.bytesMax) return { full: true };
      const answers = runSql(this.ctx.storage, calls);
      // A row written now falls due no sooner than STALE_AFTER_MS on (a pending one): an alarm set sooner holds.
      const armedSoon = this.#alarmAt !== null && this.#alarmAt <= Date.now() + STALE_AFTER_MS;
      if (!armedSoon && answers.some((a) => a.rowsWritten > 0)) await this.#arm();
      return { answers };
    }

    /** The scope the retention steps run in: this log's own database for `db`; at `now` when given. */
    #scope(now?: number): Scope {
      const clock = now === undefined ? deps : { ...deps, now: () => new Date(now) };
      return { ...createScope(this.env, this.ctx, clock), db: this.#db };
    }

    /** When the earliest row falls due for retention work; null when none will. */
    #nextDue(scope: Scope): number | null {
      const { bodiesMs, recordsMs } = scope.config.webhookRetention;
      const row = this.ctx.storage.sql
        .exec<Record<"pending" | "held" | "unpurged" | "expiring", number | null>>(
          `SELECT
             (SELECT min(updated_at) FROM webhook_deliveries WHERE status = 'pending') AS pending,
             (SELECT min(created_at) FROM webhook_deliveries WHERE status = 'held') AS held,
             (SELECT min(created_at) FROM webhook_deliveries INDEXED BY webhook_deliveries_unpurged
                WHERE body_purged_at IS NULL AND status IN ('delivered', 'failed')) AS unpurged,
             (SELECT min(created_at) FROM webhook_deliveries INDEXED BY webhook_deliveries_expiring
                WHERE body_purged_at IS NOT NULL AND status IN ('delivered', 'failed')) AS expiring`,
        )
        .one();
      const due = [
        row.pending === null ? null : row.pending + STALE_AFTER_MS,
        row.held === null ? null : row.held + bodiesMs,
        row.unpurged === null ? null : row.unpurged + bodiesMs,
        row.expiring === null ? null : row.expiring + recordsMs,
      ].filter((at): at is number => at !== null);
      return due.length === 0 ? null : Math.min(...due);
    }

    /** Sets the alarm for `at`, or for the earliest due row, unless it is set sooner already. */
    async #arm(at?: number): Promise<void> {
      const next = at ?? this.#nextDue(this.#scope());
      const set = await this.ctx.storage.getAlarm();
      if (next !== null && (set === null || set > next)) {
        this.#alarmAt = Math.max(next, Date.now());
        await this.ctx.storage.setAlarm(this.#alarmAt);
      } else this.#alarmAt = set;
    }

    /**
     * One retention pass at the Worker's clock (`deps.now`), or at `now`: each step takes at most
     * `RETENTION_SLICE` rows; how many each took. Public for tests, which run it at their own clock.
     */
    async retain(now?: number): Promise<{ swept: number; expired: number; purged: number; deleted: number }> {
      const scope = this.#scope(now);
      const at = scope.deps.now().getTime();
      const { bodiesMs, recordsMs } = scope.config.webhookRetention;
      const swept = await sweepStalled(scope);
      const expired = await expireHeld(scope, bodiesMs, RETENTION_SLICE);
      const purged = await purgeBodies(scope, new Date(at - bodiesMs), RETENTION_SLICE);
      const deleted = await deleteRecords(scope, new Date(at - recordsMs), RETENTION_SLICE);
      return { swept, expired, purged, deleted };
    }

    override async alarm(): Promise<void> {
      this.#alarmAt = null;
      if (!this.retainsByAlarm) return;
      let next: number | undefined;
      try {
        const done = await this.retain();
        // A full slice: more is due now; the next slice a moment later, so calls are answered in between.
        if (Object.values(done).some((n) => n >= RETENTION_SLICE)) next = Date.now() + SLICE_GAP_MS;
      } catch (error) {
        log("error", "a delivery log's retention failed: it tries again", { error });
        next = Date.now() + RETRY_MS;
      } finally {
        await this.#arm(next);
      }
    }
  };
}
