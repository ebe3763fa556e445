import { and, eq, isNull } from "drizzle-orm";
import { auditAs, auditStatement } from "../audit";
import { checkGrant, permissionsOfRequest } from "../auth/access";
import { DEFAULT_PERMISSIONS, isPermission, PERMISSIONS } from "../auth/permissions";
import { generateToken, hashToken, VISIBLE_PREFIX_LENGTH } from "../auth/tokens";
import { serviceAccounts, type ServiceAccount } from "../db/schema";
import { invalidField, notFound } from "../platform/errors";
import { createRouter } from "../platform/router";
import { newId } from "../platform/ids";
import { rfc3339, rfc3339OrNull } from "../platform/openapi";
import { listPage } from "../platform/pagination";
import { createServiceAccount, listServiceAccounts, revokeServiceAccount } from "./routes";
import { forgetToken } from "../auth/lookup";

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
});

export const serviceAccountsRouter = createRouter()
  .openapi(createServiceAccount, async (c) => {
    const { project_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = c.var.scope.deps.now();
    const expiresAt = new Date(body.expires_at);
    if (expiresAt.getTime() <= now.getTime() || expiresAt.getTime() - now.getTime() > MAX_TOKEN_LIFETIME_MS) {
      throw invalidField("body", "expires_at", "must be in the future, at most 2 years ahead", "expires_at must be in the future and at most 2 years ahead.");
    }
    // Stored in the list's order and without repeats, so equal grants read alike.
    const scopes = PERMISSIONS.filter((p) => (body.scopes ?? DEFAULT_PERMISSIONS).includes(p));
    checkGrant(c.get("principal"), await permissionsOfRequest(c), scopes, expiresAt);
    const token = generateToken();
    const id = newId("sa", now.getTime());
    const db = c.var.scope.db;
    const [[account]] = await db.batch([
      db
        .insert(serviceAccounts)
        .values({
          id,
          projectId: project_id,
          name: body.name,
          tokenHash: await hashToken(token),
          tokenPrefix: token.slice(0, VISIBLE_PREFIX_LENGTH),
          scopes,
          expiresAt,
          createdAt: now,
        })
        .returning(),
      auditStatement(c, {
        action: "service_account.create",
        target: { type: "service_account", id },
        details: { name: body.name, scopes, expires_at: expiresAt.toISOString() },
      }),
    ]);
    // A new token is random, so a miss on it was a guess; forgetting it anyway keeps creation exact.
    forgetToken(account!.tokenHash);
    return c.json({ ...serviceAccountJson(account!), token }, 201);
  })
  .openapi(listServiceAccounts, async (c) => {
    const { project_id } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const { items, nextCursor } = await listPage(c.var.scope.db, serviceAccounts, {
      filter: eq(serviceAccounts.projectId, project_id),
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
    const match = and(eq(serviceAccounts.id, service_account_id), eq(serviceAccounts.projectId, project_id));
    // One conditional write: revoking twice keeps the first revocation time.
    const [revoked] = await db
      .update(serviceAccounts)
      .set({ revokedAt: c.var.scope.deps.now() })
      .where(and(match, isNull(serviceAccounts.revokedAt)))
      .returning();
    const account = revoked ?? (await db.select().from(serviceAccounts).where(match).limit(1))[0];
    if (!account) throw notFound("service account", service_account_id);
    forgetToken(account.tokenHash);
    auditAs(c, { action: "service_account.revoke", target: { type: "service_account", id: account.id }, details: { name: account.name } });
    return c.json(serviceAccountJson(account), 200);
  });
