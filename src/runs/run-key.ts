import { verify } from "hono/jwt";
import { bearerToken, invalidToken } from "../auth/challenge";
import { accountForToken, touchLastUsed } from "../auth/lookup";
import { TOKEN_PREFIX } from "../auth/tokens";
import { secretsEqual } from "../platform/crypto";
import { ID_PATTERN } from "../platform/ids";
import type { Scope } from "../platform/scope";

/** Who runs: the project the key is for, who it is, and the note of the key's use. */
export interface RunCaller {
  /** The one project the key may run apps of; undefined for the operator, who may run any. */
  projectId: string | undefined;
  /**
   * Who is calling, as an async run records it (`async_runs.caller`): `sa:<service_account_id>`,
   * `jwt:<sub>` (`jwt:` for a JWT without `sub`), or `admin`. Only that caller reads or cancels the
   * run or re-uses its Idempotency-Key.
   */
  id: string;
  /** False for a service account without `runs:invoke`: it gets a 403 in its own project. */
  mayRun: boolean;
  /** Notes that the key was used (`last_used_at`, at most one write a minute, in `waitUntil`): once the run is admitted, before its app is called. */
  markUsed(): void;
}

const PROJECT_ID = ID_PATTERN("proj");

async function serviceAccountCaller(
  scope: Scope,
  token: string,
  beforeRead: (() => Promise<void>) | undefined,
): Promise<RunCaller> {
  const account = await accountForToken(scope, token, { cached: true, beforeRead });
  return {
    projectId: account.projectId,
    id: `sa:${account.id}`,
    mayRun: account.permissions.includes("runs:invoke"),
    markUsed: () => touchLastUsed(scope, account),
  };
}

/**
 * The JWT's claims if the current secret signed it, or, during a rotation, the previous one
 * (`JWT_SECRET_PREVIOUS`), so keys issued before the rotation keep working until they expire.
 */
async function verifyJwt(
  token: string,
  secret: string,
  previous: string | undefined,
): Promise<Record<string, unknown>> {
  const options = { alg: "HS256", exp: false, nbf: false, iat: false } as const;
  try {
    return await verify(token, secret, options);
  } catch (error) {
    if (previous === undefined) throw error;
    return verify(token, previous, options);
  }
}

/** How far a signer's clock may run ahead of the service's, in seconds. */
const CLOCK_SKEW_S = 60;
/** The NumericDates a `Date` can hold (±8.64e15 ms): a claim past them is no date at all. */
const NUMERIC_DATE_MAX_S = 8.64e12;

/**
 * A NumericDate claim (RFC 7519 §2: seconds since 1970), or `undefined` when absent. Anything else
 * (a string, `-1e300`, `1e300`) is a 401 naming the claim: never a date the service would fail to
 * print or compare.
 */
function numericDate(claims: Record<string, unknown>, name: "exp" | "nbf" | "iat"): number | undefined {
  const value = claims[name];
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value) || Math.abs(value) > NUMERIC_DATE_MAX_S) {
    throw invalidToken(
      `The JWT's \`${name}\` claim must be a NumericDate: seconds since 1970, between -${NUMERIC_DATE_MAX_S} and ${NUMERIC_DATE_MAX_S}.`,
    );
  }
  return value;
}

async function jwtCaller(scope: Scope, token: string): Promise<RunCaller> {
  let claims: Record<string, unknown>;
  try {
    // The algorithm is pinned: a token whose header names another (or `none`) is refused. Time claims
    // are checked below against the service clock.
    claims = await verifyJwt(token, scope.config.jwtSecret, scope.config.previous.jwtSecret);
  } catch {
    throw invalidToken("The JWT is not valid: it must be HS256-signed with the service's JWT secret.");
  }
  const now = scope.deps.now().getTime() / 1000;
  const exp = numericDate(claims, "exp");
  if (exp === undefined) throw invalidToken("The JWT has no numeric `exp` claim.");
  if (exp <= now) throw invalidToken(`The JWT expired at ${new Date(exp * 1000).toISOString()}.`);
  const nbf = numericDate(claims, "nbf");
  if (nbf !== undefined && nbf > now + CLOCK_SKEW_S) throw invalidToken("The JWT is not valid yet (`nbf`).");
  const iat = numericDate(claims, "iat");
  if (iat !== undefined && iat > now + CLOCK_SKEW_S) throw invalidToken("The JWT was issued in the future (`iat`).");
  // One project, by its id: no wildcard, so a signer that copies a caller's value into the claim
  // cannot mint a key for every project.
  if (typeof claims.project_id !== "string" || !PROJECT_ID.test(claims.project_id)) {
    throw invalidToken("The JWT's `project_id` claim must name one project by its id (proj_...).");
  }
  // Every holder of JWTs without `sub` for the project is one caller: the signer chose not to tell them apart.
  const subject = typeof claims.sub === "string" ? claims.sub : "";
  return { projectId: claims.project_id, id: `jwt:${subject}`, mayRun: true, markUsed: () => undefined };
}

/**
 * The run key of a request. A service account token is resolved without D1 when this isolate saw it
 * in the last `TOKEN_CACHE_TTL_MS`; `beforeRead` runs before D1 is asked about any other (it may refuse
 * the read). The admin token is accepted too: the operator may do what any service account may.
 */
export async function runCaller(
  scope: Scope,
  request: Request,
  { beforeRead }: { beforeRead?: () => Promise<void> } = {},
): Promise<RunCaller> {
  const token = bearerToken(request.headers.get("authorization"));
  if (token.startsWith(TOKEN_PREFIX)) return serviceAccountCaller(scope, token, beforeRead);
  if (token.split(".").length === 3) return jwtCaller(scope, token);
  if (await secretsEqual(token, scope.config.adminToken))
    return { projectId: undefined, id: "admin", mayRun: true, markUsed: () => undefined };
  throw invalidToken("The run key is neither a service account token nor a JWT.");
}
