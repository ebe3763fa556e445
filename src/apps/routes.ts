import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../auth/access";
import { RUNTIMES } from "../db/schema";
import {
  SCOPED_PROBLEMS,
  jsonBodyOf,
  jsonContent,
  ListQuery,
  listOf,
  PROJECT_ID_EXAMPLE,
  ProjectParams,
  problems,
  Timestamp,
} from "../platform/openapi";

export const APP_NAME = /^[a-z]([a-z0-9-]{0,48}[a-z0-9])?$/;
export const APP_ID_EXAMPLE = `${PROJECT_ID_EXAMPLE}-hello-world`;

export const DeploymentSchema = z
  .object({
    build_id: z.string(),
    origin_url: z.string(),
    deployed_at: Timestamp,
  })
  .openapi("Deployment", { description: "The newest succeeded build: where runs go." });

export const AppSchema = z
  .object({
    app_id: z.string().openapi({ example: APP_ID_EXAMPLE, description: "`{project_id}-{name}`." }),
    project_id: z.string(),
    name: z.string().openapi({ example: "hello-world" }),
    region: z.string().openapi({ example: "us-east-1" }),
    runtime: z.enum(RUNTIMES),
    current_deployment: DeploymentSchema.nullable(),
    created_at: Timestamp,
  })
  .openapi("App");

export const CreateAppBody = z
  .object({
    name: z
      .string()
      .regex(APP_NAME, "must be 1-50 lower-case letters, digits or hyphens, starting with a letter")
      .openapi({ example: "hello-world", description: "Unique in the project; the run path uses it." }),
    region: z.string().openapi({ example: "us-east-1", description: "One of the installation's regions." }),
    runtime: z.enum(RUNTIMES).openapi({ example: "cortex" }),
  })
  .strict()
  .openapi("CreateApp");

export const AppParams = ProjectParams.extend({
  app_id: z
    .string()
    .max(200)
    .openapi({ param: { name: "app_id", in: "path" }, example: APP_ID_EXAMPLE }),
});

const tags = ["Apps"];

export const createApp = createRoute({
  operationId: "createApp",
  method: "post",
  path: "/projects/{project_id}/apps",
  tags,
  ...requires("builds:write"),
  summary: "Create an app",
  description:
    "409 when the project already has an app of that name, or has `MAX_APPS_PER_PROJECT` apps (default 100; the problem's `limit` says how many): an app is never deleted, and each has rows of its own in the project's usage figures.",
  request: { params: ProjectParams, ...jsonBodyOf(CreateAppBody) },
  responses: {
    201: jsonContent(AppSchema, "The new app."),
    ...problems(400, 401, 403, 404, 409, 413, 415),
  },
});

export const listApps = createRoute({
  operationId: "listApps",
  method: "get",
  path: "/projects/{project_id}/apps",
  tags,
  ...requires("builds:read"),
  summary: "List apps",
  request: { params: ProjectParams, query: ListQuery },
  responses: {
    200: jsonContent(listOf(AppSchema, "AppList"), "A page of apps, by name."),
    ...SCOPED_PROBLEMS,
  },
});

export const getApp = createRoute({
  operationId: "getApp",
  method: "get",
  path: "/projects/{project_id}/apps/{app_id}",
  tags,
  ...requires("builds:read"),
  summary: "Read an app",
  request: { params: AppParams },
  responses: {
    200: jsonContent(AppSchema, "The app, with its current deployment."),
    ...SCOPED_PROBLEMS,
  },
});
