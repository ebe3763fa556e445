import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../platform/scope";
import { ApiError } from "../platform/errors";

/**
 * Managing members is the owners' (and the operator's) alone: not a token permission, so no service
 * account can be given it. The role was resolved by `projectScope`.
 */
export const isOwnerOrOperator = (c: Context<AppEnv>) => {
  const principal = c.get("principal");
  return principal.kind === "admin" || (principal.kind === "user" && principal.member?.role === "owner");
};

export const ownersOnly = createMiddleware<AppEnv>(async (c, next) => {
  if (!isOwnerOrOperator(c))
    throw new ApiError("forbidden", "Only the project's owners manage its members and invites.");
  await next();
});

/** People's names and emails are for people and the operator, not for service account tokens. */
export const peopleOnly = createMiddleware<AppEnv>(async (c, next) => {
  if (c.get("principal").kind === "service_account")
    throw new ApiError("forbidden", "Members are listed for people and the operator, not for service account tokens.");
  await next();
});

/**
 * What a member route needs, declared once in its definition as `requires` (`../auth/access.ts`) does
 * for a token permission: the OpenAPI document says which role it takes (`x-required-role`; no
 * `bearerAuth` scope, since no token permission grants it) and the middleware enforces it. `owner`:
 * the project's owners and the operator; `member`: any person of the project and the operator (a
 * handler may narrow it further, e.g. leaving is one's own membership only), never a service account.
 */
export const requiresRole = (role: "owner" | "member") => ({
  security: [{ bearerAuth: [] }],
  "x-required-role": role,
  middleware: role === "owner" ? ownersOnly : peopleOnly,
});
