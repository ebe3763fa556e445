import { and, eq, gt, isNull, sql, type SQL } from "drizzle-orm";
import type { Principal } from "../auth/principal";
import { ROLE_PERMISSIONS, type Role, ROLES } from "../auth/roles";
import type { Database } from "../db/client";
import { type CreatorKind, projectMembers, serviceAccounts } from "../db/schema";

/**
 * Who created a token. A token lives no longer than its creator's access (docs/access.md, "Tokens end
 * with their creator"): removing a member, making them a viewer, or revoking a token ends every token
 * created by them, and every token those created, at any depth.
 */
export type Creator =
  { kind: "user"; id: string } | { kind: "service_account"; id: string } | { kind: "admin"; id: null };

export function creatorOf(principal: Principal): Creator {
  switch (principal.kind) {
    case "admin":
      return { kind: "admin", id: null };
    case "service_account":
      return { kind: "service_account", id: principal.serviceAccountId };
    case "user":
      return { kind: "user", id: principal.userId };
    default: {
      const unknown: never = principal;
      throw new Error(`no creator for principal ${JSON.stringify(unknown)}`);
    }
  }
}

/** As the API shows it: the audit log's words (`operator`, `service_account`, `user`) and ids. */
export const creatorJson = (kind: CreatorKind, id: string | null) =>
  kind === "admin" ? { kind: "operator" as const, id: "operator" } : { kind, id: id ?? "" };

/** Roles whose members may create tokens; a member moved to any other role loses the tokens they made. */
export const ROLES_THAT_MINT: readonly Role[] = ROLES.filter((r) =>
  ROLE_PERMISSIONS[r].includes("service_accounts:write"),
);

/**
 * The ids of the tokens that end with `root` in `projectId`: those it created and, at any depth, those
 * they created (a token created by a token names the token as its creator). A subquery for `id IN (…)`; the recursion walks `service_accounts_creator`.
 */
export function lineage(projectId: string, root: { kind: "user" | "service_account"; id: string }): SQL {
  const start = sql`select id from service_accounts where project_id = ${projectId} and created_by_kind = ${root.kind} and created_by_id = ${root.id}`;
  return sql`with recursive tree(id) as (${start} union select s.id from service_accounts s join tree on s.created_by_id = tree.id where s.project_id = ${projectId} and s.created_by_kind = 'service_account') select id from tree`;
}

export interface EndedToken {
  id: string;
  name: string;
  tokenHash: string;
}

/**
 * One statement that revokes the current tokens of `root`'s lineage, if `guard` holds when it runs
 * (so it can sit in the same D1 batch as the write that ends the creator's access, and does nothing
 * when that write did nothing). Revoking twice keeps the first time.
 */
export function endLineage(
  db: Database,
  projectId: string,
  root: { kind: "user" | "service_account"; id: string },
  now: Date,
  options: { guard?: SQL } = {},
) {
  return db
    .update(serviceAccounts)
    .set({ revokedAt: now })
    .where(
      and(
        eq(serviceAccounts.projectId, projectId),
        isNull(serviceAccounts.revokedAt),
        gt(serviceAccounts.expiresAt, now),
        sql`${serviceAccounts.id} in (${lineage(projectId, root)})`,
        options.guard,
      ),
    )
    .returning({ id: serviceAccounts.id, name: serviceAccounts.name, tokenHash: serviceAccounts.tokenHash });
}

/** "This person is no longer a member of the project." */
export const noLongerMember = (projectId: string, userId: string) =>
  sql`not exists (select 1 from ${projectMembers} where ${projectMembers.projectId} = ${projectId} and ${projectMembers.userId} = ${userId})`;

/** "This person's role in the project may not create tokens." */
export const mayNoLongerMint = (projectId: string, userId: string) =>
  sql`exists (select 1 from ${projectMembers} where ${projectMembers.projectId} = ${projectId} and ${projectMembers.userId} = ${userId} and ${projectMembers.role} not in (${sql.join(
    ROLES_THAT_MINT.map((r) => sql`${r}`),
    sql`, `,
  )}))`;

/**
 * "The creator may still create tokens here", checked by the insert of a new token itself, so a token
 * created while its creator is being removed (or revoked) either exists before that removal, and ends
 * with it, or is not created at all.
 */
export function creatorStillMints(projectId: string, creator: Creator): SQL {
  switch (creator.kind) {
    case "admin":
      return sql`1`;
    case "service_account":
      return sql`exists (select 1 from ${serviceAccounts} where ${serviceAccounts.id} = ${creator.id} and ${serviceAccounts.revokedAt} is null)`;
    case "user":
      return sql`exists (select 1 from ${projectMembers} where ${projectMembers.projectId} = ${projectId} and ${projectMembers.userId} = ${creator.id} and ${projectMembers.role} in (${sql.join(
        ROLES_THAT_MINT.map((r) => sql`${r}`),
        sql`, `,
      )}))`;
  }
}
