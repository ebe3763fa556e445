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
  if (!isOwnerOrOperator(c)) throw new ApiError("forbidden", "Only the project's owners manage its members and invites.");
  await next();
});

/** People's names and emails are for people and the operator, not for service account tokens. */
export const peopleOnly = createMiddleware<AppEnv>(async (c, next) => {
  if (c.get("principal").kind === "service_account") throw new ApiError("forbidden", "Members are listed for people and the operator, not for service account tokens.");
  await next();
});
