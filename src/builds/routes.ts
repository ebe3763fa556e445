import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../auth/access";
import { AppParams } from "../apps/routes";
import { BUILD_STATUSES } from "../db/schema";
import {
  SCOPED_PROBLEMS,
  idParam,
  jsonBodyOf,
  jsonContent,
  ListQuery,
  listOf,
  problems,
  Timestamp,
} from "../platform/openapi";

export const BUILD_ID_EXAMPLE = "bld_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c";

export const BuildSchema = z
  .object({
    build_id: z.string().openapi({ example: BUILD_ID_EXAMPLE }),
    app_id: z.string(),
    project_id: z.string(),
    status: z.enum(BUILD_STATUSES).openapi({
      description: "`queued` → `building` → `succeeded` | `failed`; `cancelled` from `queued` or `building`.",
    }),
    origin_url: z.string().nullable().openapi({ description: "Where the deployment serves runs; set on `succeeded`." }),
    error: z.string().nullable().openapi({ description: "The builder's reason, on `failed`." }),
    created_at: Timestamp,
    updated_at: Timestamp,
    started_at: Timestamp.nullable(),
    finished_at: Timestamp.nullable(),
    cancelled_at: Timestamp.nullable(),
  })
  .openapi("Build");

export const ReportBuildBody = z
  .discriminatedUnion("status", [
    z.object({ status: z.literal("building") }).strict(),
    z
      .object({
        status: z.literal("succeeded"),
        origin_url: z
          .url({ protocol: /^https?$/ })
          .max(2048)
          .openapi({
            example: "https://hello-world.apps.example.net",
            description:
              "https only (http: and loopback only under ALLOW_INSECURE_TARGETS); no user info, no private, link-local or reserved IP literal.",
          }),
      })
      .strict(),
    z.object({ status: z.literal("failed"), error: z.string().trim().min(1).max(2000).optional() }).strict(),
  ])
  .openapi("BuildReport", { description: "A builder's progress report." });

export const BuildParams = AppParams.extend({
  build_id: idParam("build_id", "bld", BUILD_ID_EXAMPLE),
});

const tags = ["Builds"];

export const startBuild = createRoute({
  operationId: "startBuild",
  method: "post",
  path: "/projects/{project_id}/apps/{app_id}/builds",
  tags,
  ...requires("builds:write"),
  summary: "Start a build",
  description: "The build starts `queued`; the builder reports its progress with PATCH.",
  request: { params: AppParams },
  responses: {
    201: jsonContent(BuildSchema, "The new build."),
    ...problems(400, 401, 403, 404, 415),
  },
});

export const listBuilds = createRoute({
  operationId: "listBuilds",
  method: "get",
  path: "/projects/{project_id}/apps/{app_id}/builds",
  tags,
  ...requires("builds:read"),
  summary: "List builds",
  request: { params: AppParams, query: ListQuery },
  responses: {
    200: jsonContent(listOf(BuildSchema, "BuildList"), "A page of builds, newest first."),
    ...SCOPED_PROBLEMS,
  },
});

export const getBuild = createRoute({
  operationId: "getBuild",
  method: "get",
  path: "/projects/{project_id}/apps/{app_id}/builds/{build_id}",
  tags,
  ...requires("builds:read"),
  summary: "Read a build",
  request: { params: BuildParams },
  responses: {
    200: jsonContent(BuildSchema, "The build."),
    ...SCOPED_PROBLEMS,
  },
});

export const reportBuild = createRoute({
  operationId: "reportBuild",
  method: "patch",
  path: "/projects/{project_id}/apps/{app_id}/builds/{build_id}",
  tags,
  ...requires("builds:write"),
  summary: "Report a build's progress",
  description:
    "For the builder: `building`, then `succeeded` (with `origin_url`) or `failed`. Repeating the current state " +
    "answers 200. A report on a cancelled build gets 409 `build_cancelled`: the builder should stop.",
  request: { params: BuildParams, ...jsonBodyOf(ReportBuildBody) },
  responses: {
    200: jsonContent(BuildSchema, "The build after the report."),
    ...problems(400, 401, 403, 404, 409, 413, 415),
  },
});

export const cancelBuild = createRoute({
  operationId: "cancelBuild",
  method: "delete",
  path: "/projects/{project_id}/apps/{app_id}/builds/{build_id}",
  tags,
  ...requires("builds:write"),
  summary: "Cancel a build",
  description:
    "Cancels an ongoing (`queued` or `building`) build. Cancelling a cancelled build answers the same 200; " +
    "a finished (`succeeded` or `failed`) build gets 409 `build_not_cancellable`.",
  request: { params: BuildParams },
  responses: {
    200: jsonContent(BuildSchema, "The cancelled build."),
    ...problems(400, 401, 403, 404, 409),
  },
});
