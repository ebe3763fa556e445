import { eq } from "drizzle-orm";
import { verify } from "hono/jwt";
import { bearerToken, touchLastUsed } from "../auth/middleware";
import type { Permission } from "../auth/permissions";
import { hashToken, isWellFormedToken, TOKEN_PREFIX } from "../auth/tokens";
import { serviceAccounts, type ServiceAccount } from "../db/schema";
import { TtlCache } from "../platform/cache";
import { secretsEqual } from "../platform/crypto";
import { ApiError } from "../platform/errors";
import { ID_PATTERN } from "../platform/ids";
import type { RunScope } from "./scope";

/**
 * How long this isolate trusts what it learnt about a run key or a deployment without asking D1 again.
 * A revoked token or a new deployment is seen by every isolate within this time (at once by the isolate
 * that made the change).
 */
export const RUN_CACHE_TTL_MS = 30_000;

type CachedAccount = Pick<ServiceAccount, "id" | "projectId" | "expiresAt" | "revokedAt" | "lastUsedAt"> & { mayRun: boolean };
/** Service accounts by token hash. */
export const runKeyCache = new TtlCache<CachedAccount>(RUN_CACHE_TTL_MS);

/** Who runs: the project the key is for, and a follow-up to do once the upstream has been called. */
export interface RunCaller {
  /** The one project the key may run apps of; undefined for the operator, who may run any. */
  projectId: string | undefined;
  /** False for a service account without `runs:invoke`: it gets a 403 in its own project. */
  mayRun: boolean;
  afterRun(): void;
}

const PROJECT_ID = ID_PATTERN("proj");
const REALM = 'Bearer realm="edge-gateway"';
const invalid = (detail: string) =>
  new ApiError("invalid_token", detail, { headers: { "WWW-Authenticate": `${REALM}, error="invalid_token", error_description="${detail.replace(/"/g, "'")}"` } });

async function serviceAccountCaller(scope: RunScope, token: string): Promise<RunCaller> {
  if (!isWellFormedToken(token)) throw invalid("The token is not a valid token.");
  const now = scope.deps.now();
  const hash = await hashToken(token);
  let account = runKeyCache.get(hash, now.getTime());
  if (!account) {
    const [row] = await scope.db.select().from(serviceAccounts).where(eq(serviceAccounts.tokenHash, hash)).limit(1);
    if (!row) throw invalid("The token is not a valid token.");
    account = {
      id: row.id,
      projectId: row.projectId,
      expiresAt: row.expiresAt,
      revokedAt: row.revokedAt,
      lastUsedAt: row.lastUsedAt,
      mayRun: row.scopes.includes("runs:invoke" satisfies Permission),
    };
    runKeyCache.set(hash, account, now.getTime());
  }
  if (account.revokedAt) throw invalid("The token was revoked.");
  if (account.expiresAt.getTime() <= now.getTime()) throw invalid(`The token expired at ${account.expiresAt.toISOString()}.`);
  const found = account;
  return { projectId: found.projectId, mayRun: found.mayRun, afterRun: () => touchLastUsed(scope.env.DB, scope.ctx, now.getTime(), found) };
}

async function jwtCaller(scope: RunScope, token: string): Promise<RunCaller> {
  let claims: Record<string, unknown>;
  try {
    // The algorithm is pinned: a token whose header names another (or `none`) is refused. Time claims
    // are checked below against the service clock.
    claims = await verify(token, scope.config.jwtSecret, { alg: "HS256", exp: false, nbf: false, iat: false });
  } catch {
    throw invalid("The JWT is not valid: it must be HS256-signed with the service's JWT secret.");
  }
  const now = scope.deps.now().getTime() / 1000;
  if (typeof claims.exp !== "number") throw invalid("The JWT has no numeric `exp` claim.");
  if (claims.exp <= now) throw invalid(`The JWT expired at ${new Date(claims.exp * 1000).toISOString()}.`);
  if (typeof claims.nbf === "number" && claims.nbf > now + 60) throw invalid("The JWT is not valid yet (`nbf`).");
  // One project, by its id: no wildcard, so a signer that copies a caller's value into the claim
  // cannot mint a key for every project.
  if (typeof claims.project_id !== "string" || !PROJECT_ID.test(claims.project_id)) {
    throw invalid("The JWT's `project_id` claim must name one project by its id (proj_...).");
  }
  return { projectId: claims.project_id, mayRun: true, afterRun: () => undefined };
}

/**
 * The run key of a request, resolved without D1 when this isolate saw it in the last `RUN_CACHE_TTL_MS`.
 * The admin token is accepted too: the operator may do what any service account may.
 */
export async function runCaller(scope: RunScope): Promise<RunCaller> {
  const token = bearerToken(scope.request.headers.get("authorization"));
  if (token.startsWith(TOKEN_PREFIX)) return serviceAccountCaller(scope, token);
  if (token.split(".").length === 3) return jwtCaller(scope, token);
  if (await secretsEqual(token, scope.config.adminToken)) return { projectId: undefined, mayRun: true, afterRun: () => undefined };
  throw invalid("The run key is neither a service account token nor a JWT.");
}
