import { and, eq, gt, lte } from "drizzle-orm";
import type { Database } from "../db/client";
import { dashboardSessions } from "../db/schema";
import { sha256Hex } from "../platform/crypto";
import type { Session } from "./session";

/**
 * Signed-in sessions are also recorded in D1: the signed cookie proves who issued it, the row proves it
 * has not been ended. Signing out deletes the row, so a copied cookie stops working at once.
 */
export async function storeSession(db: Database, session: Session, now: Date): Promise<void> {
  await db.batch([
    // Ended sessions go on the way, which keeps the table to the sessions alive now.
    db.delete(dashboardSessions).where(lte(dashboardSessions.expiresAt, now)),
    db.insert(dashboardSessions).values({
      idHash: await sha256Hex(session.sid),
      userId: session.userId ?? null,
      expiresAt: new Date(session.expiresAt),
      createdAt: now,
    }),
  ]);
}

export async function sessionIsLive(db: Database, session: Session, now: Date): Promise<boolean> {
  const [row] = await db
    .select({ idHash: dashboardSessions.idHash })
    .from(dashboardSessions)
    .where(and(eq(dashboardSessions.idHash, await sha256Hex(session.sid)), gt(dashboardSessions.expiresAt, now)))
    .limit(1);
  return row !== undefined;
}

export async function endSession(db: Database, session: Session): Promise<void> {
  await db.delete(dashboardSessions).where(eq(dashboardSessions.idHash, await sha256Hex(session.sid)));
}
