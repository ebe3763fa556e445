import { and, eq } from "drizzle-orm";
import type { Database } from "../db/client";
import { type ReceiverState, webhookReceivers } from "../db/schema";
import { LANE_CONCURRENCY } from "./lane-capacity";

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
      set: { ...set, updatedAt: now },
    })
    .returning();
  return row!;
}
