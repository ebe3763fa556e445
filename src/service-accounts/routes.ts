import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../auth/access";
import { DEFAULT_PERMISSIONS, PERMISSIONS } from "../auth/permissions";
import { ID_PATTERN } from "../platform/ids";
import {
  SCOPED_PROBLEMS,
  idParam,
  jsonBodyOf,
  jsonContent,
  ListQuery,
  listOf,
  ProjectParams,
  problems,
  Timestamp,
} from "../platform/openapi";

export const ServiceAccountSchema = z
  .object({
    id: z.string().openapi({ example: "sa_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    project_id: z.string(),
    name: z.string(),
    token_prefix: z
      .string()
      .openapi({ example: "egsa_3kTq9XbZ", description: "The start of the token, to recognise it." }),
    scopes: z
      .array(z.enum(PERMISSIONS))
      .openapi({ example: [...DEFAULT_PERMISSIONS], description: "What the token may do in its project." }),
    expires_at: Timestamp,
    last_used_at: Timestamp.nullable().openapi({ description: "Updated at most once a minute." }),
    revoked_at: Timestamp.nullable(),
    created_at: Timestamp,
    created_by: z
      .object({
        kind: z.enum(["user", "service_account", "operator"]),
        id: z.string().openapi({ description: "The person's id, the service account's id, or `operator`." }),
      })
      .openapi({
        description:
          "Who created the token. It ends with them: when the person leaves the project or becomes a viewer, or the service account is revoked. Tokens made before creators were recorded show the operator.",
      }),
  })
  .openapi("ServiceAccount");

export const CreatedServiceAccountSchema = ServiceAccountSchema.extend({
  token: z.string().openapi({
    example: "egsa_3kTq9XbZ0a1b2c3d4e5f6g7h8i9j0k1l2m",
    description: "The bearer token. Shown only in this response: store it as a secret.",
  }),
}).openapi("CreatedServiceAccount");

export const CreateServiceAccountBody = z
  .object({
    name: z.string().trim().min(1).max(100).openapi({ example: "ci-production" }),
    expires_at: z.iso.datetime({ offset: true }).openapi({
      example: "2027-06-30T00:00:00Z",
      description:
        "RFC 3339; must be in the future, at most 2 years ahead, and no later than the creating token's own expiry.",
    }),
    scopes: z
      .array(z.enum(PERMISSIONS))
      .min(1, "name at least one scope")
      .max(PERMISSIONS.length)
      .optional()
      .openapi({
        example: ["builds:read", "builds:write"],
        description: `What the token may do. Default: ${DEFAULT_PERMISSIONS.join(", ")}. Only scopes the creating credential has itself may be given.`,
      }),
  })
  .strict()
  .openapi("CreateServiceAccount");

const ServiceAccountParams = ProjectParams.extend({
  service_account_id: idParam("service_account_id", "sa", "sa_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c"),
});

const ServiceAccountListQuery = ListQuery.extend({
  creator: z
    .string()
    .refine(
      (v) => ID_PATTERN("usr").test(v) || ID_PATTERN("sa").test(v),
      "must be a person's id (usr_…) or a service account's id (sa_…)",
    )
    .optional()
    .openapi({
      description:
        "Only the tokens that end with this creator: those this person or service account created and, at any depth, those created by them. What leaving the project (or revoking the account) would end.",
      example: "usr_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c",
    }),
}).strict();

const tags = ["Service accounts"];
// Every operation on keys needs `service_accounts:write`, listing too: who holds keys to the project
// is for those who manage them.
const access = requires("service_accounts:write");

export const createServiceAccount = createRoute({
  operationId: "createServiceAccount",
  method: "post",
  path: "/projects/{project_id}/service-accounts",
  tags,
  ...access,
  summary: "Create a service account and its token",
  description: "The token is in this response only; afterwards only its prefix is shown.",
  request: { params: ProjectParams, ...jsonBodyOf(CreateServiceAccountBody) },
  responses: {
    201: jsonContent(CreatedServiceAccountSchema, "The new service account, with its token."),
    ...problems(400, 401, 403, 404, 413, 415),
  },
});

export const listServiceAccounts = createRoute({
  operationId: "listServiceAccounts",
  method: "get",
  path: "/projects/{project_id}/service-accounts",
  tags,
  ...access,
  summary: "List service accounts",
  request: { params: ProjectParams, query: ServiceAccountListQuery },
  responses: {
    200: jsonContent(listOf(ServiceAccountSchema, "ServiceAccountList"), "A page of service accounts, newest first."),
    ...SCOPED_PROBLEMS,
  },
});

export const revokeServiceAccount = createRoute({
  operationId: "revokeServiceAccount",
  method: "delete",
  path: "/projects/{project_id}/service-accounts/{service_account_id}",
  tags,
  ...access,
  summary: "Revoke a service account",
  description:
    "Its token stops working at once, and so does every token it created (and those created by them): a token lives no longer than its creator. Each ended token gets its own `service_account.revoke` audit entry. Revoking again answers the same.",
  request: { params: ServiceAccountParams },
  responses: {
    200: jsonContent(ServiceAccountSchema, "The revoked service account."),
    ...SCOPED_PROBLEMS,
  },
});
