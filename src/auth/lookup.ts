import { eq } from "drizzle-orm";
import { serviceAccounts, type ServiceAccount } from "../db/schema";
import { TtlCache } from "../platform/cache";
import type { Scope } from "../platform/scope";
import { invalidToken } from "./challenge";
import { isPermission, type Permission } from "./permissions";
import { hashToken, isWellFormedToken } from "./tokens";
import { log } from "../platform/log";

/**
 * How long this isolate trusts what it learnt about a token on the run path without asking D1 again.
 * A revoked token is refused by every isolate within this time (at once by the isolate that revoked
 * it, and at once on the management API, which always asks D1).
 */
export const TOKEN_CACHE_TTL_MS = 30_000;

export type TokenAccount = Pick<
  ServiceAccount,
  "id" | "projectId" | "name" | "expiresAt" | "revokedAt" | "lastUsedAt"
> & {
  /** Its stored `scopes` that name a known permission. */
  permissions: Permission[];
};

/** Service accounts by token hash: the run path's view (the management API reads D1 every time). */
const accounts = new TtlCache<TokenAccount>(TOKEN_CACHE_TTL_MS);

/**
 * Well-formed tokens D1 did not know, by hash, so a forged token costs one D1 read per isolate per
 * `TOKEN_CACHE_TTL_MS`, not one per request. Bounded to `UNKNOWN_TOKENS_MAX` entries (oldest evicted
 * first): each is a 64-character hex key plus a small record, well under 2 MB in all against the
 * isolate's 128 MB, however many random tokens an attacker sprays. A token created after a miss works
 * at once here because creation calls `forgetToken`; other isolates learn it within the TTL.
 */
export const UNKNOWN_TOKENS_MAX = 10_000;
const unknownTokens = new TtlCache<true>(TOKEN_CACHE_TTL_MS, UNKNOWN_TOKENS_MAX);

export interface LookupOptions {
  /** Skip D1 for a token this isolate saw in the last `TOKEN_CACHE_TTL_MS` (the run path). */
  cached: boolean;
  /**
   * Called before D1 is asked about a token neither cache knows, and only then; it may throw to refuse
   * the read (the run path's address limit: a forged token's checksum is public, so each new one would
   * otherwise cost a D1 read).
   */
  beforeRead?: () => Promise<void>;
}

/** The current service account a token belongs to; a 401 that says why otherwise. */
export async function accountForToken(
  scope: Scope,
  token: string,
  { cached, beforeRead }: LookupOptions,
): Promise<TokenAccount> {
  if (!isWellFormedToken(token)) throw invalidToken("The token is not a valid token.");
  const now = scope.deps.now().getTime();
  const hash = await hashToken(token);
  let account = cached ? accounts.get(hash, now) : undefined;
  if (!account) {
    if (cached && unknownTokens.get(hash, now)) throw invalidToken("The token is not a valid token.");
    await beforeRead?.();
    const [row] = await scope.db.select().from(serviceAccounts).where(eq(serviceAccounts.tokenHash, hash)).limit(1);
    if (!row) {
      if (cached) unknownTokens.set(hash, true, now);
      throw invalidToken("The token is not a valid token.");
    }
    account = {
      id: row.id,
      projectId: row.projectId,
      name: row.name,
      expiresAt: row.expiresAt,
      revokedAt: row.revokedAt,
      lastUsedAt: row.lastUsedAt,
      permissions: row.scopes.filter(isPermission),
    };
    if (cached) accounts.set(hash, account, now);
  }
  if (account.revokedAt) throw invalidToken("The token was revoked.");
  if (account.expiresAt.getTime() <= now)
    throw invalidToken(`The token expired at ${account.expiresAt.toISOString()}.`);
  return account;
}

/**
 * Makes this isolate see a change to a token at once (others within TOKEN_CACHE_TTL_MS): a revoked
 * token is refused, a newly created one is no longer remembered as unknown.
 */
export function forgetToken(tokenHash: string): void {
  accounts.delete(tokenHash);
  unknownTokens.delete(tokenHash);
}

/** How often `last_used_at` is written for one token, at most. */
export const LAST_USED_RESOLUTION_MS = 60_000;
// Per isolate: when this isolate last wrote `last_used_at` for a service account.
const lastUsedWrites = new Map<string, number>();

/** Records that a token was used, without a D1 write on every request: at most once a minute per token. */
export function touchLastUsed(scope: Scope, account: Pick<ServiceAccount, "id" | "lastUsedAt">) {
  const now = scope.deps.now().getTime();
  const known = Math.max(account.lastUsedAt?.getTime() ?? 0, lastUsedWrites.get(account.id) ?? 0);
  if (now - known < LAST_USED_RESOLUTION_MS) return;
  lastUsedWrites.set(account.id, now);
  if (lastUsedWrites.size > 10_000) lastUsedWrites.delete(lastUsedWrites.keys().next().value!);
  const write = scope.env.DB.prepare(
    "UPDATE service_accounts SET last_used_at = ?1 WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at <= ?3)",
  )
    .bind(now, account.id, now - LAST_USED_RESOLUTION_MS)
    .run()
    .catch((error: unknown) => log("warn", "last_used_at write failed", { service_account_id: account.id, error }));
  scope.ctx.waitUntil(write);
}
