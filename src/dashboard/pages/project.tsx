import { projectReceiverSettings } from "../../webhooks/receiver-settings";
import type { Child } from "hono/jsx";
import type { ProjectItem } from "../api-types";
import type { DashContext } from "../context";
import { dashPath } from "../context";
import { ProblemMessage } from "../components";
import { renderPage } from "../layout";
import { membershipOf } from "../../auth/membership";

/**
 * Loads the page's project through the API first, so an unknown id (or one the API refuses) shows the
 * API's answer as a page instead of a half-rendered one.
 */
export async function withProject(
  c: DashContext,
  body: (project: ProjectItem) => Promise<Response>,
): Promise<Response> {
  const projectId = c.req.param("project_id") ?? "";
  const project = await c.get("api")<ProjectItem>("GET", `/projects/${encodeURIComponent(projectId)}`);
  if (project.ok) {
    const user = c.get("user");
    // The API admitted the person, so they are a member; the role decides which controls they see.
    const member = user ? await membershipOf(c.var.scope.db, project.data.project_id, user.id) : undefined;
    c.set("access", { role: user ? (member?.role ?? "viewer") : "operator" });
    // One indexed read of the project's receiver settings: a stopped or failing receiver is said at the top of every page.
    const receivers = await projectReceiverSettings(c.var.scope.db, project.data.project_id).catch(() => []);
    c.set(
      "stoppedReceivers",
      receivers
        .filter((r) => r.state !== "active" || r.failingSince !== null)
        .map((r) => ({ origin: r.origin, state: r.state, cause: r.stateCause, failingSince: r.failingSince })),
    );
    return body(project.data);
  }
  return renderPage(
    c,
    { title: "Project not found", status: project.problem.status === 404 ? 404 : 400 },
    <>
      <h1>Project not found</h1>
      <ProblemMessage problem={project.problem} />
      <p>
        <a href={dashPath("/projects")}>See all projects</a>
      </p>
    </>,
  );
}

/** The heading of a project page: the page name and the project's. */
export const ProjectHeading = ({ project, title }: { project: ProjectItem; title: string; children?: Child }) => (
  <h1>
    {title} <span class="muted">· {project.name}</span>
  </h1>
);
