import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../auth/access";
import { ACTOR_KINDS } from "../db/schema";
import { jsonContent, ListQuery, listOf, ProjectParams, SCOPED_PROBLEMS, Timestamp } from "../platform/openapi";

export const AuditEntrySchema = z
  .object({
    id: z.string().openapi({ example: "aud_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    project_id: z.string(),
    actor: z.object({
      kind: z.enum(ACTOR_KINDS),
      id: z.string().openapi({
        example: "sa_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c",
        description: "A service account's or person's id, or `operator`.",
      }),
      name: z.string().nullable().openapi({ example: "ci-production", description: "The actor's name at the time." }),
    }),
    action: z.string().openapi({ example: "build.cancel" }),
    target: z.object({
      type: z.string().openapi({ example: "build" }),
      id: z.string().openapi({ example: "bld_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    }),
    details: z.record(z.string(), z.unknown()).nullable(),
    client_ip: z.string().nullable().openapi({ example: "203.0.113.7" }),
    request_id: z.string().openapi({ description: "The `X-Request-Id` of the write." }),
    at: Timestamp,
  })
  .openapi("AuditEntry");

export const AuditQuery = ListQuery.extend({
  actor: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .openapi({ description: "Only this actor's entries: a service account's id, a person's id, or `operator`." }),
  action: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .openapi({ description: "Only entries of this action, e.g. `build.cancel`." }),
}).strict();

export const listAuditLog = createRoute({
  operationId: "listAuditLog",
  method: "get",
  path: "/projects/{project_id}/audit-log",
  tags: ["Audit log"],
  ...requires("audit:read"),
  summary: "List the audit log",
  description:
    "Every management write of the project (who, what, on what, when, from where), newest first. Entries are never changed.",
  request: { params: ProjectParams, query: AuditQuery },
  responses: {
    200: jsonContent(listOf(AuditEntrySchema, "AuditLog"), "A page of entries, newest first."),
    ...SCOPED_PROBLEMS,
  },
});
