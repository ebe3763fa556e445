import type { Role } from "../db/schema";
import { type Permission, PERMISSIONS } from "./permissions";

export { ROLES, type Role } from "../db/schema";

/**
 * What each role of a project member may do, in the tokens' vocabulary: a viewer reads, a developer
 * does everything a token can (so the tokens they create cannot exceed their own rights), an owner
 * too. Managing members is not a token permission: it is the owner's alone (`mayManageMembers`).
 */
export const ROLE_PERMISSIONS: Readonly<Record<Role, readonly Permission[]>> = {
  viewer: PERMISSIONS.filter((p) => p.endsWith(":read")),
  developer: PERMISSIONS,
  owner: PERMISSIONS,
};

export const roleAllows = (role: Role, permission: Permission) => ROLE_PERMISSIONS[role].includes(permission);

export const mayManageMembers = (role: Role) => role === "owner";

export const isRole = (value: string): value is Role =>
  value === "owner" || value === "developer" || value === "viewer";
