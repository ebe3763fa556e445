import { listQuery, type Page, type Problem } from "../api";
import type { ProjectItem } from "../api-types";
import { type DashContext, type DashRouter, dashPath, formText, projectPath } from "../context";
import { Csrf, DataTable, Field, Pager, ProblemMessage, when } from "../components";
import { renderPage } from "../layout";
import { PROJECT_NAV } from "../nav";

async function projectsPage(c: DashContext, form: { name: string; problem?: Problem }) {
  const projects = await c.get("api")<Page<ProjectItem>>("GET", `/projects?${listQuery(c, 100)}`);
  return renderPage(
    c,
    { title: "Projects", status: form.problem ? (form.problem.status === 400 ? 400 : 409) : 200 },
    <>
      <h1>Projects</h1>
      {!projects.ok ? (
        <ProblemMessage problem={projects.problem} action="Loading projects" />
      ) : projects.data.data.length === 0 ? (
        c.get("user") ? (
          <p class="muted">
            You are not a member of any project yet. A project's owner invites you by your email address; the invite is
            yours at your next sign-in.
          </p>
        ) : (
          <p class="muted">No projects yet. Create the first one below.</p>
        )
      ) : (
        <DataTable
          caption="Projects"
          columns={["Name", "Project id", { label: "Created", optional: true }]}
          footer={<Pager path={dashPath("/projects")} next={projects.data.next_cursor} />}
        >
          {projects.data.data.map((p) => (
            <tr>
              <td>
                <a href={projectPath(p.project_id, "/apps")}>{p.name}</a>
              </td>
              <td>
                <code>{p.project_id}</code>
              </td>
              <td class="optional">{when(p.created_at)}</td>
            </tr>
          ))}
        </DataTable>
      )}
      {!c.get("user") && (
        <section class="card" aria-labelledby="create-project">
          <h2 id="create-project">Create a project</h2>
          {form.problem && <ProblemMessage problem={form.problem} action="The project was not created" />}
          <form method="post" action={dashPath("/projects")} class="stack">
            <Csrf token={c.get("csrf")} />
            <Field
              label="Name"
              name="name"
              value={form.name}
              required
              maxlength={100}
              error={form.problem?.fields.name}
              hint="For people: for example “Acme production”."
            />
            <div>
              <button type="submit">Create project</button>
            </div>
          </form>
        </section>
      )}
    </>,
  );
}

export function registerProjects(dash: DashRouter) {
  dash.get("/", (c) => c.redirect(dashPath("/projects"), 303));
  dash.get("/projects", (c) => projectsPage(c, { name: "" }));
  dash.post("/projects", async (c) => {
    const form = await c.req.parseBody();
    const name = formText(form, "name");
    const created = await c.get("api")<ProjectItem>("POST", "/projects", { name });
    if (!created.ok) return projectsPage(c, { name, problem: created.problem });
    return c.redirect(projectPath(created.data.project_id, "/apps"), 303);
  });
  dash.get("/projects/:project_id", (c) => c.redirect(projectPath(c.req.param("project_id"), "/apps"), 303));
  // The switcher is a GET form, so it works without script and keeps the current tab.
  dash.get("/switch", (c) => {
    const project = c.req.query("project");
    const tab = PROJECT_NAV.find((item) => item.slug === c.req.query("tab"))?.slug ?? "apps";
    if (!project) return c.redirect(dashPath("/projects"), 303);
    return c.redirect(projectPath(project, `/${tab}`), 303);
  });
}
