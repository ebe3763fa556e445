import { eq } from "drizzle-orm";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { serviceAccounts, type ServiceAccount } from "../db/schema";
import type { AppEnv } from "../platform/context";
import { secretsEqual } from "../platform/crypto";
import { ApiError } from "../platform/errors";
import { principalOfInternalRequest } from "./internal";
import { isPermission } from "./permissions";
import type { Principal } from "./principal";
import { hashToken, isWellFormedToken } from "./tokens";

const REALM = 'Bearer realm="edge-gateway"';

function unauthorized(detail: string, error?: "invalid_token" | "invalid_request"): ApiError {
  // RFC 6750 section 3: no error attribute when credentials were simply absent.
  const challenge = error ? `${REALM}, error="${error}", error_description="${detail.replace(/"/g, "'")}"` : REALM;
  return new ApiError(error ? "invalid_token" : "unauthorized", detail, { headers: { "WWW-Authenticate": challenge } });
}

/** The token of an `Authorization: Bearer` header; a 401 that says what is wrong otherwise. */
export function bearerToken(header: string | null | undefined): string {
  if (!header) throw unauthorized("Send the token as `Authorization: Bearer <token>`.");
  const match = /^Bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i.exec(header);
  if (!match) throw unauthorized("The Authorization header must be `Bearer <token>`.", "invalid_request");
  return match[1]!;
}

/** How often `last_used_at` is written for one token, at most. */
export const LAST_USED_RESOLUTION_MS = 60_000;
// Per isolate: when this isolate last wrote `last_used_at` for a service account.
const lastUsedWrites = new Map<string, number>();

/** Records that a token was used, without a D1 write on every request: at most once a minute per token. */
export function touchLastUsed(db: D1Database, ctx: Pick<ExecutionContext, "waitUntil">, now: number, account: Pick<ServiceAccount, "id" | "lastUsedAt">) {
  const known = Math.max(account.lastUsedAt?.getTime() ?? 0, lastUsedWrites.get(account.id) ?? 0);
  if (now - known < LAST_USED_RESOLUTION_MS) return;
  lastUsedWrites.set(account.id, now);
  if (lastUsedWrites.size > 10_000) lastUsedWrites.delete(lastUsedWrites.keys().next().value!);
  const write = db
    .prepare("UPDATE service_accounts SET last_used_at = ?1 WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at <= ?3)")
    .bind(now, account.id, now - LAST_USED_RESOLUTION_MS)
    .run()
    .catch((error: unknown) => console.error(JSON.stringify({ level: "warn", msg: "last_used_at write failed", error: String(error) })));
  ctx.waitUntil(write);
}

/** The service account a token belongs to, if it is current; otherwise a 401 that says why. */
export async function serviceAccountForToken(c: Context<AppEnv>, token: string): Promise<ServiceAccount> {
  if (!isWellFormedToken(token)) throw unauthorized("The token is not a valid token.", "invalid_token");
  const [account] = await c
    .get("db")
    .select()
    .from(serviceAccounts)
    .where(eq(serviceAccounts.tokenHash, await hashToken(token)))
    .limit(1);
  if (!account) throw unauthorized("The token is not a valid token.", "invalid_token");
  if (account.revokedAt) throw unauthorized("The token was revoked.", "invalid_token");
  if (account.expiresAt.getTime() <= c.get("deps").now().getTime()) {
    throw unauthorized(`The token expired at ${account.expiresAt.toISOString()}.`, "invalid_token");
  }
  return account;
}

/**
 * Establishes `principal`: the dashboard's person for its in-process calls, else from the bearer token
 * (the admin token, or a current service account token).
 */
export const authenticate = createMiddleware<AppEnv>(async (c, next) => {
  const internal = principalOfInternalRequest(c.req.raw);
  if (internal) {
    c.set("principal", internal);
    return next();
  }
  const token = bearerToken(c.req.header("authorization"));
  let principal: Principal;
  if (await secretsEqual(token, c.get("config").adminToken)) {
    principal = { kind: "admin" };
  } else {
    const account = await serviceAccountForToken(c, token);
    touchLastUsed(c.env.DB, c.executionCtx, c.get("deps").now().getTime(), account);
    principal = {
      kind: "service_account",
      serviceAccountId: account.id,
      projectId: account.projectId,
      name: account.name,
      permissions: account.scopes.filter(isPermission),
      expiresAt: account.expiresAt,
    };
  }
  c.set("principal", principal);
  await next();
});

export const requireAdmin = createMiddleware<AppEnv>(async (c, next) => {
  if (c.get("principal").kind !== "admin") {
    throw new ApiError("forbidden", "Only the operator's admin token may do this.");
  }
  await next();
});
