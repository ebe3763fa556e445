/**
 * What a credential may do inside one project. The API calls them `scopes` (OAuth's word, RFC 6750's
 * `insufficient_scope`); in code they are permissions, because "scope" names the per-invocation context.
 * Service accounts carry a subset; people get theirs from their role in the project; the operator has all.
 */
export const PERMISSIONS = [
  "runs:invoke",
  "builds:read",
  "builds:write",
  "domains:read",
  "domains:write",
  "deliveries:read",
  "deliveries:write",
  "service_accounts:write",
  "audit:read",
  "usage:read",
] as const;

export type Permission = (typeof PERMISSIONS)[number];

/**
 * A new service account's permissions when its creator names none: all but minting more tokens and
 * resending webhook deliveries (a resend sends a stored result again to its receiver: asked for by
 * name, never granted by default). Tokens created before keep the scopes they were given.
 */
export const DEFAULT_PERMISSIONS: readonly Permission[] = PERMISSIONS.filter(
  (p) => p !== "service_accounts:write" && p !== "deliveries:write",
);

export const isPermission = (value: string): value is Permission => (PERMISSIONS as readonly string[]).includes(value);
