import type { ProjectInvite } from "../db/schema";
import { auditAs } from "../audit";
import { isOwnerOrOperator } from "./access";
import { ApiError, notFound } from "../platform/errors";
import { createRouter } from "../platform/router";
import { rfc3339 } from "../platform/openapi";
import * as routes from "./routes";
import * as store from "./store";
import { forgetToken } from "../auth/lookup";
import { auditEnded } from "../service-accounts";
import type { EndedToken } from "../service-accounts/lineage";

export const memberJson = (m: store.MemberRow) => ({
  member_id: m.id,
  project_id: m.projectId,
  user_id: m.userId,
  email: m.email,
  name: m.name,
  role: m.role,
  created_at: rfc3339(m.createdAt),
  updated_at: rfc3339(m.updatedAt),
});

export const inviteJson = (i: ProjectInvite) => ({
  invite_id: i.id,
  project_id: i.projectId,
  email: i.email,
  role: i.role,
  created_at: rfc3339(i.createdAt),
  expires_at: rfc3339(i.expiresAt),
});

/**
 * The tokens a member's removal or role change ended, as the answer lists them. Forgotten by this
 * isolate's token cache at once; other isolates refuse them on the run path within
 * TOKEN_CACHE_TTL_MS (the management API reads D1 every time).
 */
function tokensEnded(ended: readonly EndedToken[]) {
  for (const token of ended) forgetToken(token.tokenHash);
  return ended.map((t) => ({ id: t.id, name: t.name }));
}

const endedDetails = (ended: readonly { id: string }[]) =>
  ended.length > 0 ? { ended_tokens: ended.map((t) => t.id) } : {};

const lastOwner = () =>
  new ApiError("last_owner", "This is the project's last owner: make another member owner first.");

export const membersRouter = createRouter()
  .openapi(routes.listMembers, async (c) => {
    const { project_id } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const { items, nextCursor } = await store.listMembers(c.var.scope.db, project_id, limit, cursor);
    return c.json({ data: items.map(memberJson), next_cursor: nextCursor }, 200);
  })
  .openapi(routes.addMember, async (c) => {
    const { project_id } = c.req.valid("param");
    const { email, role } = c.req.valid("json");
    const db = c.var.scope.db;
    const user = await store.userByVerifiedEmail(db, email);
    if (!user)
      throw new ApiError(
        "not_found",
        `Nobody has signed in with the verified email '${email}' yet: send an invite instead.`,
      );
    const id = await store.addMember(db, project_id, user.id, role, c.var.scope.deps.now());
    if (!id)
      throw new ApiError("conflict", `'${email}' is a member of this project already; change their role instead.`);
    auditAs(c, { action: "member.add", target: { type: "member", id }, details: { email, role } });
    return c.json(memberJson((await store.memberById(db, project_id, id))!), 201);
  })
  .openapi(routes.changeMember, async (c) => {
    const { project_id, member_id } = c.req.valid("param");
    const { role } = c.req.valid("json");
    const db = c.var.scope.db;
    const member = await store.memberById(db, project_id, member_id);
    if (!member) throw notFound("member", member_id);
    const change = await store.changeRole(db, project_id, member, role, c.var.scope.deps.now());
    if (change.result === "not_found") throw notFound("member", member_id);
    if (change.result === "last_owner") throw lastOwner();
    const ended = tokensEnded(change.ended);
    auditAs(c, {
      action: "member.change_role",
      target: { type: "member", id: member_id },
      details: { role, ...endedDetails(ended) },
    });
    auditEnded(c, change.ended, { reason: "creator_role_changed", creator: member.userId });
    return c.json(
      { ...memberJson((await store.memberById(db, project_id, member_id))!), ended_service_accounts: ended },
      200,
    );
  })
  .openapi(routes.removeMember, async (c) => {
    const { project_id, member_id } = c.req.valid("param");
    const principal = c.get("principal");
    const leaving = principal.kind === "user" && principal.member?.id === member_id;
    if (!leaving && !isOwnerOrOperator(c))
      throw new ApiError("forbidden", "Only the project's owners remove members; anyone may leave.");
    const db = c.var.scope.db;
    const member = await store.memberById(db, project_id, member_id);
    if (!member) throw notFound("member", member_id);
    const removal = await store.removeMember(db, project_id, member, c.var.scope.deps.now());
    if (removal.result === "not_found") throw notFound("member", member_id);
    if (removal.result === "last_owner") throw lastOwner();
    const ended = tokensEnded(removal.ended);
    auditAs(c, {
      action: leaving ? "member.leave" : "member.remove",
      target: { type: "member", id: member_id },
      details: { email: member.email, role: member.role, ...endedDetails(ended) },
    });
    auditEnded(c, removal.ended, { reason: "creator_removed", creator: member.userId });
    return c.json({ ...memberJson(member), ended_service_accounts: ended }, 200);
  })
  .openapi(routes.createInvite, async (c) => {
    const { project_id } = c.req.valid("param");
    const { email, role } = c.req.valid("json");
    const invite = await store.createInvite(c.var.scope.db, project_id, email, role, c.var.scope.deps.now());
    if (!invite)
      throw new ApiError(
        "conflict",
        `'${email}' has an open invite to this project already; withdraw it to send another.`,
      );
    auditAs(c, { action: "invite.create", target: { type: "invite", id: invite.id }, details: { email, role } });
    return c.json(inviteJson(invite), 201);
  })
  .openapi(routes.listInvites, async (c) => {
    const { project_id } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const { items, nextCursor } = await store.listInvites(c.var.scope.db, project_id, limit, cursor);
    return c.json({ data: items.map(inviteJson), next_cursor: nextCursor }, 200);
  })
  .openapi(routes.deleteInvite, async (c) => {
    const { project_id, invite_id } = c.req.valid("param");
    const invite = await store.deleteInvite(c.var.scope.db, project_id, invite_id);
    if (!invite) throw notFound("invite", invite_id);
    auditAs(c, {
      action: "invite.delete",
      target: { type: "invite", id: invite_id },
      details: { email: invite.email },
    });
    return c.json(inviteJson(invite), 200);
  });
