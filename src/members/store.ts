import { and, desc, eq, gt, inArray, lt, lte, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { projectInvites, projectMembers, type ProjectInvite, type Role, type User, users } from "../db/schema";
import { newId } from "../platform/ids";
import { decodeCursor, page } from "../platform/pagination";
import { type EndedToken, endLineage, mayNoLongerMint, noLongerMember } from "../service-accounts/lineage";

/** How long an invite waits to be claimed. */
export const INVITE_TTL_MS = 14 * 24 * 60 * 60 * 1000;

const memberColumns = {
  id: projectMembers.id,
  projectId: projectMembers.projectId,
  userId: projectMembers.userId,
  role: projectMembers.role,
  createdAt: projectMembers.createdAt,
  updatedAt: projectMembers.updatedAt,
  email: users.email,
  name: users.name,
};

export type MemberRow = {
  id: string;
  projectId: string;
  userId: string;
  role: Role;
  createdAt: Date;
  updatedAt: Date;
  email: string | null;
  name: string | null;
};

export async function listMembers(db: Database, projectId: string, limit: number, cursor: string | undefined) {
  const after = decodeCursor(cursor);
  const rows = await db
    .select(memberColumns)
    .from(projectMembers)
    .innerJoin(users, eq(users.id, projectMembers.userId))
    .where(and(eq(projectMembers.projectId, projectId), after === undefined ? undefined : lt(projectMembers.id, after)))
    .orderBy(desc(projectMembers.id))
    .limit(limit + 1);
  return page(rows, limit, (m) => m.id);
}

export async function memberById(db: Database, projectId: string, memberId: string): Promise<MemberRow | undefined> {
  const [row] = await db
    .select(memberColumns)
    .from(projectMembers)
    .innerJoin(users, eq(users.id, projectMembers.userId))
    .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.id, memberId)))
    .limit(1);
  return row;
}

/** The person whose verified email this is (emails are stored lower case). */
export async function userByVerifiedEmail(db: Database, email: string): Promise<User | undefined> {
  const [row] = await db
    .select()
    .from(users)
    .where(and(eq(users.email, email.toLowerCase()), eq(users.emailVerified, true)))
    .orderBy(desc(users.lastSignInAt))
    .limit(1);
  return row;
}

/** Adds a member; undefined when the person is a member already. */
export async function addMember(
  db: Database,
  projectId: string,
  userId: string,
  role: Role,
  now: Date,
): Promise<string | undefined> {
  const [row] = await db
    .insert(projectMembers)
    .values({ id: newId("mem", now.getTime()), projectId, userId, role, createdAt: now, updatedAt: now })
    .onConflictDoNothing()
    .returning({ id: projectMembers.id });
  return row?.id;
}

// "This member is not an owner, or another owner remains": in the same statement as the write, so two
// owners removing each other at once cannot both succeed (D1 runs statements one at a time).
const anotherOwnerRemains = (projectId: string) =>
  sql`(${projectMembers.role} <> 'owner' or (select count(*) from ${projectMembers} where ${projectMembers.projectId} = ${projectId} and ${projectMembers.role} = 'owner') > 1)`;

export type ChangeResult =
  { result: "changed"; ended: EndedToken[] } | { result: "not_found" } | { result: "last_owner" };

/**
 * Changes a member's role. In the same batch, if the new role may not create tokens, the tokens the
 * person created (and those created by them) end: the guard reads the role the first statement left,
 * so a change refused as the last owner's ends nothing.
 */
export async function changeRole(
  db: Database,
  projectId: string,
  member: Pick<MemberRow, "id" | "userId">,
  role: Role,
  now: Date,
): Promise<ChangeResult> {
  const scope = and(eq(projectMembers.projectId, projectId), eq(projectMembers.id, member.id));
  const [[changed], ended] = await db.batch([
    db
      .update(projectMembers)
      .set({ role, updatedAt: now })
      .where(and(scope, role === "owner" ? undefined : anotherOwnerRemains(projectId)))
      .returning({ id: projectMembers.id }),
    endLineage(db, projectId, { kind: "user", id: member.userId }, now, {
      guard: mayNoLongerMint(projectId, member.userId),
    }),
  ]);
  if (changed) return { result: "changed", ended: ended };
  return (await memberById(db, projectId, member.id)) ? { result: "last_owner" } : { result: "not_found" };
}

/**
 * Removes a member and, in the same batch, ends the tokens they created (and those created by them),
 * guarded by "no longer a member", so a removal refused as the last owner's ends nothing.
 */
export async function removeMember(
  db: Database,
  projectId: string,
  member: Pick<MemberRow, "id" | "userId">,
  now: Date,
): Promise<ChangeResult> {
  const scope = and(eq(projectMembers.projectId, projectId), eq(projectMembers.id, member.id));
  const [[removed], ended] = await db.batch([
    db
      .delete(projectMembers)
      .where(and(scope, anotherOwnerRemains(projectId)))
      .returning({ id: projectMembers.id }),
    endLineage(db, projectId, { kind: "user", id: member.userId }, now, {
      guard: noLongerMember(projectId, member.userId),
    }),
  ]);
  if (removed) return { result: "changed", ended: ended };
  return (await memberById(db, projectId, member.id)) ? { result: "last_owner" } : { result: "not_found" };
}

/** Creates an invite; undefined when this email has an open invite to the project already. */
export async function createInvite(
  db: Database,
  projectId: string,
  email: string,
  role: Role,
  now: Date,
): Promise<ProjectInvite | undefined> {
  const [row] = await db
    .batch([
      // An expired invite of the same address makes way for the new one.
      db
        .delete(projectInvites)
        .where(
          and(
            eq(projectInvites.projectId, projectId),
            eq(projectInvites.email, email),
            lte(projectInvites.expiresAt, now),
          ),
        ),
      db
        .insert(projectInvites)
        .values({
          id: newId("inv", now.getTime()),
          projectId,
          email,
          role,
          createdAt: now,
          expiresAt: new Date(now.getTime() + INVITE_TTL_MS),
        })
        .onConflictDoNothing()
        .returning(),
    ])
    .then(([, inserted]) => inserted);
  return row;
}

export async function listInvites(db: Database, projectId: string, limit: number, cursor: string | undefined) {
  const after = decodeCursor(cursor);
  const rows = await db
    .select()
    .from(projectInvites)
    .where(and(eq(projectInvites.projectId, projectId), after === undefined ? undefined : lt(projectInvites.id, after)))
    .orderBy(desc(projectInvites.id))
    .limit(limit + 1);
  return page(rows, limit, (i) => i.id);
}

export async function deleteInvite(
  db: Database,
  projectId: string,
  inviteId: string,
): Promise<ProjectInvite | undefined> {
  const [row] = await db
    .delete(projectInvites)
    .where(and(eq(projectInvites.projectId, projectId), eq(projectInvites.id, inviteId)))
    .returning();
  return row;
}

/**
 * Turns the open invites of a person's email into memberships. Only a verified email claims: anyone
 * can type an address into a provider's sign-up form, only its owner can verify it. An invite to a
 * project the person already belongs to is used up without changing their role.
 */
export async function claimInvites(
  db: Database,
  user: Pick<User, "id" | "email" | "emailVerified">,
  now: Date,
): Promise<number> {
  if (!user.email || !user.emailVerified) return 0;
  const open = await db
    .select()
    .from(projectInvites)
    .where(and(eq(projectInvites.email, user.email), gt(projectInvites.expiresAt, now)));
  if (open.length === 0) return 0;
  // D1 binds at most 100 parameters per statement: 6 per membership row, so 15 invites per statement.
  const statements = [];
  for (let i = 0; i < open.length; i += 15) {
    const chunk = open.slice(i, i + 15);
    statements.push(
      db
        .insert(projectMembers)
        .values(
          chunk.map((invite) => ({
            id: newId("mem", now.getTime()),
            projectId: invite.projectId,
            userId: user.id,
            role: invite.role,
            createdAt: now,
            updatedAt: now,
          })),
        )
        .onConflictDoNothing(),
      db.delete(projectInvites).where(
        inArray(
          projectInvites.id,
          chunk.map((invite) => invite.id),
        ),
      ),
    );
  }
  await db.batch(statements as [(typeof statements)[number], ...(typeof statements)[number][]]);
  return open.length;
}
