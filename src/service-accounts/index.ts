import { and, eq, isNull, sql } from "drizzle-orm";
import type { Context } from "hono";
import { auditAlso, auditAs, auditStatement } from "../audit";
import type { AppEnv } from "../platform/scope";
import { checkGrant, permissionsOfRequest } from "../auth/access";
import { DEFAULT_PERMISSIONS, isPermission, PERMISSIONS } from "../auth/permissions";
import { generateToken, hashToken, VISIBLE_PREFIX_LENGTH } from "../auth/tokens";
import { serviceAccounts, type ServiceAccount } from "../db/schema";
import { ApiError, invalidField, notFound } from "../platform/errors";
import { createRouter } from "../platform/router";
import { newId } from "../platform/ids";
import { rfc3339, rfc3339OrNull } from "../platform/openapi";
import { listPage } from "../platform/pagination";
import { createServiceAccount, listServiceAccounts, revokeServiceAccount } from "./routes";
import { forgetToken } from "../auth/lookup";
import { creatorJson, creatorOf, creatorStillMints, endLineage, type EndedToken, lineage } from "./lineage";

/** The longest a token may live: long-lived credentials are the ones that leak. */
export const MAX_TOKEN_LIFETIME_MS = 2 * 366 * 24 * 60 * 60 * 1000;

export const serviceAccountJson = (a: ServiceAccount) => ({
  id: a.id,
  project_id: a.projectId,
  name: a.name,
  token_prefix: a.tokenPrefix,
  scopes: a.scopes.filter(isPermission),
  expires_at: rfc3339(a.expiresAt),
  last_used_at: rfc3339OrNull(a.lastUsedAt),
  revoked_at: rfc3339OrNull(a.revokedAt),
  created_at: rfc3339(a.createdAt),
  created_by: creatorJson(a.createdByKind, a.createdById),
});

export const serviceAccountsRouter = createRouter()
  .openapi(createServiceAccount, async (c) => {
    const { project_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = c.var.scope.deps.now();
    const expiresAt = new Date(body.expires_at);
    if (expiresAt.getTime() <= now.getTime() || expiresAt.getTime() - now.getTime() > MAX_TOKEN_LIFETIME_MS) {
      throw invalidField(
        "body",
        "expires_at",
        "must be in the future, at most 2 years ahead",
        "expires_at must be in the future and at most 2 years ahead.",
      );
    }
    // Stored in the list's order and without repeats, so equal grants read alike.
    const scopes = PERMISSIONS.filter((p) => (body.scopes ?? DEFAULT_PERMISSIONS).includes(p));
    const principal = c.get("principal");
    checkGrant(principal, await permissionsOfRequest(c), scopes, expiresAt);
    const token = generateToken();
    const id = newId("sa", now.getTime());
    const creator = creatorOf(principal);
    const db = c.var.scope.db;
    const tokenHash = await hashToken(token);
    // INSERT … SELECT … WHERE the creator may still create tokens: a creator removed (or revoked) while
    // this request ran gets no token, rather than one its removal did not see. Columns in the table's order.
    const insert = db
      .insert(serviceAccounts)
      .select(
        sql`select ${id}, ${project_id}, ${body.name}, ${tokenHash}, ${token.slice(0, VISIBLE_PREFIX_LENGTH)}, ${JSON.stringify(scopes)}, ${expiresAt.getTime()}, null, null, ${now.getTime()}, ${creator.kind}, ${creator.id} where ${creatorStillMints(project_id, creator)}`,
      )
      .returning();
    const [[account]] = await db.batch([
      insert,
      auditStatement(c, {
        action: "service_account.create",
        target: { type: "service_account", id },
        details: { name: body.name, scopes, expires_at: expiresAt.toISOString() },
      }),
    ]);
    if (!account)
      throw new ApiError(
        "forbidden",
        "Your access to this project ended while the token was being created: no token was created.",
      );
    // A new token is random, so a miss on it was a guess; forgetting it anyway keeps creation exact.
    forgetToken(account.tokenHash);
    return c.json({ ...serviceAccountJson(account), token }, 201);
  })
  .openapi(listServiceAccounts, async (c) => {
    const { project_id } = c.req.valid("param");
    const { limit, cursor, creator } = c.req.valid("query");
    const root =
      creator === undefined
        ? undefined
        : ({ kind: creator.startsWith("sa_") ? "service_account" : "user", id: creator } as const);
    const { items, nextCursor } = await listPage(c.var.scope.db, serviceAccounts, {
      filter: and(
        eq(serviceAccounts.projectId, project_id),
        root ? sql`${serviceAccounts.id} in (${lineage(project_id, root)})` : undefined,
      ),
      key: serviceAccounts.id,
      keyOf: (a) => a.id,
      order: "desc",
      limit,
      cursor,
    });
    return c.json({ data: items.map(serviceAccountJson), next_cursor: nextCursor }, 200);
  })
  .openapi(revokeServiceAccount, async (c) => {
    const { project_id, service_account_id } = c.req.valid("param");
    const db = c.var.scope.db;
    const now = c.var.scope.deps.now();
    const match = and(eq(serviceAccounts.id, service_account_id), eq(serviceAccounts.projectId, project_id));
    // One batch ends the account and every token it created, at any depth (a token lives no longer
    // than its creator's access). Revoking twice keeps the first revocation time.
    const [[revoked], descendants] = await db.batch([
      db
        .update(serviceAccounts)
        .set({ revokedAt: now })
        .where(and(match, isNull(serviceAccounts.revokedAt)))
        .returning(),
      endLineage(db, project_id, { kind: "service_account", id: service_account_id }, now),
    ]);
    const account = revoked ?? (await db.select().from(serviceAccounts).where(match).limit(1))[0];
    if (!account) throw notFound("service account", service_account_id);
    for (const token of descendants) forgetToken(token.tokenHash);
    forgetToken(account.tokenHash);
    auditAs(c, {
      action: "service_account.revoke",
      target: { type: "service_account", id: account.id },
      details: {
        name: account.name,
        ...(descendants.length > 0 ? { ended_tokens: descendants.map((t) => t.id) } : {}),
      },
    });
    auditEnded(c, descendants, { reason: "creator_revoked", creator: account.id });
    return c.json(serviceAccountJson(account), 200);
  });

/**
 * One `service_account.revoke` entry per token that ended because its creator's access ended, beside
 * the entry of the write that ended it (same request id), so the audit log answers "why did this
 * token stop working" by the token's own id.
 */
export function auditEnded(
  c: Context<AppEnv>,
  ended: readonly EndedToken[],
  why: { reason: "creator_removed" | "creator_role_changed" | "creator_revoked"; creator: string },
) {
  for (const token of ended) {
    auditAlso(c, {
      action: "service_account.revoke",
      target: { type: "service_account", id: token.id },
      details: { name: token.name, ...why },
    });
  }
}
