import { createMiddleware } from "hono/factory";
import { secretsEqual } from "../platform/crypto";
import { ApiError } from "../platform/errors";
import type { AppEnv } from "../platform/scope";
import { bearerToken } from "./challenge";
import { accountForToken, touchLastUsed } from "./lookup";
import type { Principal } from "./principal";

declare module "hono" {
  interface ContextVariableMap {
    /** Set by `authenticate`; read only on routes behind it. */
    principal: Principal;
  }
}

/** Establishes `principal` from the bearer token: the admin token, or a current service account token. */
export const authenticate = createMiddleware<AppEnv>(async (c, next) => {
  const scope = c.var.scope;
  const token = bearerToken(c.req.header("authorization"));
  let principal: Principal;
  if (await secretsEqual(token, scope.config.adminToken)) {
    principal = { kind: "admin" };
  } else {
    // The management API asks D1 every time: a revoked token stops working everywhere at once here.
    const account = await accountForToken(scope, token, { cached: false });
    touchLastUsed(scope, account);
    principal = {
      kind: "service_account",
      serviceAccountId: account.id,
      projectId: account.projectId,
      name: account.name,
      permissions: account.permissions,
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
