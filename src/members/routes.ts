import { createRoute, z } from "@hono/zod-openapi";
import { ROLES } from "../db/schema";
import { requiresRole } from "./access";
import {
  idParam,
  jsonBodyOf,
  jsonContent,
  ListQuery,
  listOf,
  ProjectParams,
  problems,
  Timestamp,
} from "../platform/openapi";

const Role = z.enum(ROLES).openapi({
  description:
    "`owner`: everything, members too; `developer`: apps, builds, domains, deliveries, service accounts; `viewer`: read only.",
});
const Email = z
  .email()
  .max(254)
  .transform((value) => value.toLowerCase())
  .openapi({ example: "ada@example.com" });

export const MemberSchema = z
  .object({
    member_id: z.string().openapi({ example: "mem_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    project_id: z.string(),
    user_id: z.string(),
    email: z.string().nullable(),
    name: z.string().nullable(),
    role: Role,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Member");

/** A member as a role change or a removal left them, with the tokens that ended because of it. */
export const ChangedMemberSchema = MemberSchema.extend({
  ended_service_accounts: z
    .array(z.object({ id: z.string().openapi({ example: "sa_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }), name: z.string() }))
    .openapi({
      description:
        "The tokens this write ended: those the person created, and those created by them. Removing a member ends them all; a role that may not create tokens (`viewer`) ends them too. Each also has its own `service_account.revoke` audit entry.",
    }),
}).openapi("ChangedMember");

export const InviteSchema = z
  .object({
    invite_id: z.string().openapi({ example: "inv_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    project_id: z.string(),
    email: z.string(),
    role: Role,
    created_at: Timestamp,
    expires_at: Timestamp.openapi({ description: "Unclaimed by then, the invite lapses." }),
  })
  .openapi("Invite");

export const AddMemberBody = z.object({ email: Email, role: Role }).strict().openapi("AddMember");
export const ChangeMemberBody = z.object({ role: Role }).strict().openapi("ChangeMember");
export const CreateInviteBody = z.object({ email: Email, role: Role }).strict().openapi("CreateInvite");

const MemberParams = ProjectParams.extend({
  member_id: idParam("member_id", "mem", "mem_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c"),
});
const InviteParams = ProjectParams.extend({
  invite_id: idParam("invite_id", "inv", "inv_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c"),
});

const tags = ["Members"];
const OWNERS = "Owners of the project and the operator only; a service account token gets 403.";

export const listMembers = createRoute({
  method: "get",
  path: "/projects/{project_id}/members",
  operationId: "listMembers",
  tags,
  summary: "List members",
  description: "Every member of the project and the operator may list; a service account token gets 403.",
  ...requiresRole("member"),
  request: { params: ProjectParams, query: ListQuery },
  responses: {
    200: jsonContent(listOf(MemberSchema, "MemberList"), "A page of members, newest first."),
    ...problems(400, 401, 403, 404),
  },
});

export const addMember = createRoute({
  method: "post",
  path: "/projects/{project_id}/members",
  operationId: "addMember",
  tags,
  summary: "Add a person who has signed in",
  description: `Adds the person whose verified email this is. Someone who has not signed in yet is invited instead (\`POST …/invites\`). ${OWNERS}`,
  ...requiresRole("owner"),
  request: { params: ProjectParams, ...jsonBodyOf(AddMemberBody) },
  responses: {
    201: jsonContent(MemberSchema, "The new member."),
    ...problems(400, 401, 403, 404, 409, 413, 415),
  },
});

export const changeMember = createRoute({
  method: "patch",
  path: "/projects/{project_id}/members/{member_id}",
  operationId: "changeMember",
  tags,
  summary: "Change a member's role",
  description: `The last owner keeps the owner role (409 \`last_owner\`). Made a \`viewer\`, a role that may not create tokens, the member's tokens end (\`ended_service_accounts\`). ${OWNERS}`,
  ...requiresRole("owner"),
  request: { params: MemberParams, ...jsonBodyOf(ChangeMemberBody) },
  responses: {
    200: jsonContent(ChangedMemberSchema, "The member with the new role, and the tokens that ended."),
    ...problems(400, 401, 403, 404, 409, 413, 415),
  },
});

export const removeMember = createRoute({
  method: "delete",
  path: "/projects/{project_id}/members/{member_id}",
  operationId: "removeMember",
  tags,
  summary: "Remove a member, or leave",
  description: `Owners remove anyone; every member may remove themselves (leave). The last owner can neither leave nor be removed (409 \`last_owner\`). The tokens the member created, and those created by them, end with the removal (\`ended_service_accounts\`); \`GET …/service-accounts?creator={user_id}\` lists them beforehand.`,
  ...requiresRole("member"),
  request: { params: MemberParams },
  responses: {
    200: jsonContent(ChangedMemberSchema, "The member removed, and the tokens that ended."),
    ...problems(400, 401, 403, 404, 409),
  },
});

export const createInvite = createRoute({
  method: "post",
  path: "/projects/{project_id}/invites",
  operationId: "createInvite",
  tags,
  summary: "Invite by email",
  description: `The person becomes a member with this role when they sign in with this email, verified by their provider. ${OWNERS}`,
  ...requiresRole("owner"),
  request: { params: ProjectParams, ...jsonBodyOf(CreateInviteBody) },
  responses: {
    201: jsonContent(InviteSchema, "The open invite."),
    ...problems(400, 401, 403, 404, 409, 413, 415),
  },
});

export const listInvites = createRoute({
  method: "get",
  path: "/projects/{project_id}/invites",
  operationId: "listInvites",
  tags,
  summary: "List open invites",
  description: OWNERS,
  ...requiresRole("owner"),
  request: { params: ProjectParams, query: ListQuery },
  responses: {
    200: jsonContent(listOf(InviteSchema, "InviteList"), "A page of invites not yet claimed, newest first."),
    ...problems(400, 401, 403, 404),
  },
});

export const deleteInvite = createRoute({
  method: "delete",
  path: "/projects/{project_id}/invites/{invite_id}",
  operationId: "deleteInvite",
  tags,
  summary: "Withdraw an invite",
  description: OWNERS,
  ...requiresRole("owner"),
  request: { params: InviteParams },
  responses: {
    200: jsonContent(InviteSchema, "The withdrawn invite."),
    ...problems(400, 401, 403, 404),
  },
});
