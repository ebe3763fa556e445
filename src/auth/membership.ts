import { and, eq } from "drizzle-orm";
import type { Database } from "../db/client";
import { projectMembers, type Role } from "../db/schema";

/**
 * A person's membership of a project as access checks read it: its id and role. The members folder
 * manages memberships (invites, roles, removal); deciding what a person may do is auth's, so the read
 * lives here and `members/` imports it, never the other way (folders depend one way only).
 */
export interface Membership {
  id: string;
  role: Role;
}

/** A person's membership of a project, if they have one. */
export async function membershipOf(db: Database, projectId: string, userId: string): Promise<Membership | undefined> {
  const [row] = await db
    .select({ id: projectMembers.id, role: projectMembers.role })
    .from(projectMembers)
    .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId)))
    .limit(1);
  return row;
}
