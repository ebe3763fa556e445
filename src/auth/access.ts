import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { Database } from "../db/client";
import type { AppEnv } from "../platform/scope";
import { ApiError } from "../platform/errors";
import { PERMISSIONS, type Permission } from "./permissions";
import type { Principal } from "./principal";
import { ROLE_PERMISSIONS } from "./roles";
import { membershipOf } from "./membership";
import { quoted } from "./challenge";

const ALL: ReadonlySet<Permission> = new Set(PERMISSIONS);
const NONE: ReadonlySet<Permission> = new Set();

/**
 * What `principal` may do in `projectId`: the one answer every check asks. The operator may do all;
 * a service account what its `scopes` say, in its own project only; nobody anything elsewhere.
 * a person what their role in the project allows (`roles.ts`).
 * Async and given the database because a person's role is read from it.
 */
export async function permissionsIn(
  principal: Principal,
  projectId: string,
  db: Database,
): Promise<ReadonlySet<Permission>> {
  switch (principal.kind) {
    case "admin":
      return ALL;
    case "service_account":
      return principal.projectId === projectId ? new Set(principal.permissions) : NONE;
    case "user": {
      // `projectScope` resolved the role for the path's project; any other project is read.
      const member =
        principal.member?.projectId === projectId
          ? principal.member
          : await membershipOf(db, projectId, principal.userId);
      return member ? new Set(ROLE_PERMISSIONS[member.role]) : NONE;
    }
    default: {
      const unknown: never = principal;
      throw new Error(`no permissions defined for principal ${JSON.stringify(unknown)}`);
    }
  }
}

/**
 * A 403 that says which permissions were missing, in RFC 6750's words (section 3.1): a client that
 * reads `WWW-Authenticate` learns the scopes to ask for.
 */
export function insufficientScope(missing: readonly Permission[], detail?: string): ApiError {
  const scope = missing.join(" ");
  const text =
    detail ??
    `This needs the scope${missing.length > 1 ? "s" : ""} ${missing.map((p) => `'${p}'`).join(", ")}, which this credential does not have.`;
  return new ApiError("insufficient_scope", text, {
    headers: {
      "WWW-Authenticate": `Bearer realm="edge-gateway", error="insufficient_scope", error_description="${quoted(text)}", scope="${scope}"`,
    },
  });
}

/** The permissions of this request's principal in the project of its path. */
export const permissionsOfRequest = (c: Context<AppEnv>) =>
  permissionsIn(c.get("principal"), c.req.param("project_id") ?? "", c.var.scope.db);

/**
 * Refuses the request unless its principal holds `permission` in the project of the path. Runs after
 * `projectScope`, so a credential of another project has already had its 404.
 */
export const requirePermission = (permission: Permission) =>
  createMiddleware<AppEnv>(async (c, next) => {
    if (!(await permissionsOfRequest(c)).has(permission)) throw insufficientScope([permission]);
    await next();
  });

/**
 * What a route needs, declared once in its definition: the scope in the OpenAPI document
 * (`security: [{ bearerAuth: ["builds:write"] }]`) and the check that enforces it. Spread it into
 * `createRoute({...})`; a route without it needs only a credential of the project.
 */
export const requires = (permission: Permission) => ({
  security: [{ bearerAuth: [permission] }],
  middleware: requirePermission(permission),
});

/**
 * Whether `principal` may give a new service account `requested` expiring at `expiresAt`: only
 * permissions it holds itself, and (for a service account) no later than its own expiry, so a leaked
 * token can neither widen nor outlive itself through the tokens it mints. Throws the refusal.
 */
export function checkGrant(
  principal: Principal,
  held: ReadonlySet<Permission>,
  requested: readonly Permission[],
  expiresAt: Date,
) {
  const missing = requested.filter((p) => !held.has(p));
  if (missing.length > 0) {
    throw insufficientScope(
      missing,
      `A credential can only give scopes it has itself; it lacks ${missing.map((p) => `'${p}'`).join(", ")}.`,
    );
  }
  if (principal.kind === "service_account" && expiresAt.getTime() > principal.expiresAt.getTime()) {
    const own = principal.expiresAt.toISOString();
    throw new ApiError("validation_failed", `expires_at must be no later than this token's own expiry, ${own}.`, {
      errors: [
        {
          location: "body",
          field: "expires_at",
          message: `must be no later than ${own}, when the creating token expires`,
        },
      ],
    });
  }
}
