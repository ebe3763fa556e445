import { createRoute, z } from "@hono/zod-openapi";
import { requireAdmin } from "../auth/middleware";
import {
  AUTHENTICATED_PROBLEMS,
  jsonBodyOf,
  jsonContent,
  ListQuery,
  listOf,
  PROJECT_ID_EXAMPLE,
  ProjectParams,
  problems,
  Timestamp,
} from "../platform/openapi";

export const ProjectSchema = z
  .object({
    project_id: z.string().openapi({ example: PROJECT_ID_EXAMPLE }),
    name: z.string(),
    created_at: Timestamp,
  })
  .openapi("Project");

export const CreateProjectBody = z
  .object({
    name: z.string().trim().min(1).max(100).openapi({ example: "Acme production" }),
  })
  .strict()
  .openapi("CreateProject");

const tags = ["Projects"];
const security = [{ bearerAuth: [] }];

export const createProject = createRoute({
  operationId: "createProject",
  method: "post",
  path: "/projects",
  tags,
  security,
  summary: "Create a project",
  description: "Only the operator's admin token may create projects.",
  middleware: [requireAdmin] as const,
  request: jsonBodyOf(CreateProjectBody),
  responses: {
    201: jsonContent(ProjectSchema, "The new project."),
    ...problems(400, 401, 403, 413, 415),
  },
});

export const listProjects = createRoute({
  operationId: "listProjects",
  method: "get",
  path: "/projects",
  tags,
  security,
  summary: "List projects",
  description:
    "The admin token sees every project; a service account token its own; a person the projects they are a member of.",
  request: { query: ListQuery },
  responses: {
    200: jsonContent(listOf(ProjectSchema, "ProjectList"), "A page of projects, newest first."),
    ...problems(400, 401),
  },
});

export const getProject = createRoute({
  operationId: "getProject",
  method: "get",
  path: "/projects/{project_id}",
  tags,
  security,
  summary: "Read a project",
  request: { params: ProjectParams },
  responses: {
    200: jsonContent(ProjectSchema, "The project."),
    ...AUTHENTICATED_PROBLEMS,
  },
});
