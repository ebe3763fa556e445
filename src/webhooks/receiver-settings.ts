import { and, eq, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { type ReceiverState, webhookReceivers } from "../db/schema";
import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import { LANE_CONCURRENCY } from "./lane-capacity";
import { laneObject, receiverLaneName } from "./message";

/**
 * A receiver's settings (db/schema.ts `webhook_receivers`): what the customer chose for one origin of
 * the project's webhook endpoints. The lane reads them; the receiver routes write them. No row means
 * the defaults below, so a receiver nobody has touched costs no row.
 */
export interface ReceiverSettings {
  projectId: string;
  origin: string;
  concurrency: number;
  state: ReceiverState;
  stateCause: string | null;
  stateChangedAt: Date | null;
  /** Since when its deliveries fail (its last settled one failed); null when the last was delivered. */
  failingSince: Date | null;
}

export const defaultReceiverSettings = (projectId: string, origin: string): ReceiverSettings => ({
  projectId,
  origin,
  concurrency: LANE_CONCURRENCY,
  state: "active",
  stateCause: null,
  stateChangedAt: null,
  failingSince: null,
});

export async function receiverSettings(db: Database, projectId: string, origin: string): Promise<ReceiverSettings> {
  const [row] = await db
    .select()
    .from(webhookReceivers)
    .where(and(eq(webhookReceivers.projectId, projectId), eq(webhookReceivers.origin, origin)))
    .limit(1);
  return row ?? defaultReceiverSettings(projectId, origin);
}

/** Every receiver of a project that has settings of its own. */
export async function projectReceiverSettings(db: Database, projectId: string): Promise<ReceiverSettings[]> {
  return db.select().from(webhookReceivers).where(eq(webhookReceivers.projectId, projectId));
}

/**
 * The order of a receiver's state changes: `state_changed_at` (ms), 0 when it never changed. Every write
 * of the state makes it at least one more than before (`STATE_CHANGED_AT`), whatever the writer's clock,
 * so that a lane told two changes out of order keeps the later one (lane.ts `configure`).
 */
export const stateVersion = (settings: Pick<ReceiverSettings, "stateChangedAt">): number =>
  settings.stateChangedAt?.getTime() ?? 0;

/**
 * `state_changed_at` in an upsert of `webhook_receivers` that changes the state: the writer's time, or one
 * past the row's former value when that is not earlier (two writers' clocks apart, a test's fake clock).
 */
export const STATE_CHANGED_AT = sql.raw("max(excluded.state_changed_at, coalesce(state_changed_at, 0) + 1)");

/** Writes the given settings over the current ones (defaults where there is no row yet). */
export async function updateReceiverSettings(
  db: Database,
  projectId: string,
  origin: string,
  change: Partial<Pick<ReceiverSettings, "concurrency" | "state" | "stateCause">>,
  now = new Date(),
): Promise<ReceiverSettings> {
  const stateChange =
    change.state === undefined
      ? {}
      : { state: change.state, stateCause: change.stateCause ?? null, stateChangedAt: now };
  const set = { ...(change.concurrency === undefined ? {} : { concurrency: change.concurrency }), ...stateChange };
  const [row] = await db
    .insert(webhookReceivers)
    .values({ ...defaultReceiverSettings(projectId, origin), ...set, updatedAt: now })
    .onConflictDoUpdate({
      target: [webhookReceivers.projectId, webhookReceivers.origin],
      // A change of state comes after the one before it, whatever this writer's clock says.
      set: { ...set, ...(change.state === undefined ? {} : { stateChangedAt: STATE_CHANGED_AT }), updatedAt: now },
    })
    .returning();
  return row!;
}

/** What a receiver's lanes are told of its settings (lane.ts `configure`): what they act on, and its state's order. */
export interface LaneSettings extends Pick<ReceiverSettings, "projectId" | "origin" | "concurrency" | "state"> {
  stateVersion: number;
}

/** The settings a lane is told, as written in D1. */
export type WrittenSettings = Pick<
  ReceiverSettings,
  "projectId" | "origin" | "concurrency" | "state" | "stateChangedAt"
>;

const laneSettingsOf = (settings: WrittenSettings): LaneSettings => ({
  projectId: settings.projectId,
  origin: settings.origin,
  concurrency: settings.concurrency,
  state: settings.state,
  stateVersion: stateVersion(settings),
});

/**
 * Tells a receiver's lane its settings as just written in D1 (the control plane), and through it each of
 * its shards: a lane keeps its own copy, so that a delivery costs no D1 read. True once every lane of the
 * receiver holds them and no delivery held on the former state is still being written (lane.ts
 * `configure`). False when a lane could not be told (logged): the change is on record in D1 either way,
 * and a lane reads it again once its copy is older than its TTL (receiver-controls.ts
 * RECEIVER_STATE_TTL_MS for the state, lane.ts SETTINGS_TTL_MS for the concurrency).
 */
export async function tellLanes(env: Env, settings: WrittenSettings): Promise<boolean> {
  try {
    await laneObject(env, receiverLaneName(settings.projectId, settings.origin)).configure(laneSettingsOf(settings));
    return true;
  } catch (error) {
    log("warn", "webhook receiver's lanes not told of its new settings: they read them within a minute", {
      project_id: settings.projectId,
      origin: settings.origin,
      error,
    });
    return false;
  }
}

/**
 * A customer's change of a receiver's settings: written in D1, then told to its lanes (`tellLanes`). The
 * settings written, and whether the lanes hold them now (`told`).
 */
export async function changeReceiverSettings(
  scope: Pick<Scope, "db" | "deps" | "env">,
  projectId: string,
  origin: string,
  change: Parameters<typeof updateReceiverSettings>[3],
): Promise<{ settings: ReceiverSettings; told: boolean }> {
  const settings = await updateReceiverSettings(scope.db, projectId, origin, change, scope.deps.now());
  return { settings, told: await tellLanes(scope.env, settings) };
}
