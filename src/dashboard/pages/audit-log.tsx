import type { z } from "@hono/zod-openapi";
import type { AuditEntrySchema } from "../../audit/routes";
import { type Page, seg } from "../api";
import type { ProjectItem } from "../api-types";
import { type DashContext, type DashRouter, projectPath } from "../context";
import { DataTable, Field, FilterActions, Pager, ProblemMessage, when } from "../components";
import { renderPage } from "../layout";
import { ProjectHeading, withProject } from "./project";

type Entry = z.infer<typeof AuditEntrySchema>;

const PAGE_SIZE = 50;

function Actor({ actor }: { actor: Entry["actor"] }) {
  if (actor.kind === "operator") return <>the operator</>;
  return (
    <>
      {actor.name ?? actor.kind.replace("_", " ")}
      <br />
      <code class="muted">{actor.id}</code>
    </>
  );
}

async function auditLogPage(c: DashContext, project: ProjectItem) {
  const pid = project.project_id;
  const filters: Record<string, string> = {};
  for (const name of ["actor", "action"] as const) {
    const value = (c.req.query(name) ?? "").trim();
    if (value) filters[name] = value;
  }
  const query = new URLSearchParams({ limit: String(PAGE_SIZE), ...filters });
  const cursor = c.req.query("cursor");
  if (cursor) query.set("cursor", cursor);
  const list = await c.get("api")<Page<Entry>>("GET", `/projects/${seg(pid)}/audit-log?${query}`);
  const path = projectPath(pid, "/audit-log");
  const filtered = Object.keys(filters).length > 0;
  const problem = list.ok ? undefined : list.problem;
  return renderPage(
    c,
    {
      title: "Audit log",
      projectId: pid,
      tab: "audit-log",
      status: list.ok ? 200 : list.problem.status === 404 ? 404 : list.problem.status === 403 ? 403 : 400,
    },
    <>
      <ProjectHeading project={project} title="Audit log" />
      <p class="muted">
        Every change made to this project through the API or this dashboard: who, what, when and from where. Newest
        first; entries are never changed.
      </p>
      <form method="get" action={path} class="filter" role="search" aria-label="Filter the audit log">
        <Field
          label="Actor"
          name="actor"
          value={filters.actor ?? ""}
          maxlength={64}
          error={problem?.fields.actor}
          hint="A service account id (sa_…), a person's id, or “operator”."
        />
        <Field
          label="Action"
          name="action"
          value={filters.action ?? ""}
          maxlength={64}
          error={problem?.fields.action}
          hint="For example build.cancel or domain.create."
        />
        <FilterActions path={path} filtered={filtered} />
      </form>
      {!list.ok ? (
        <ProblemMessage problem={list.problem} action="Loading the audit log" />
      ) : list.data.data.length === 0 ? (
        <p>{filtered ? "No entries match." : "No entries yet."}</p>
      ) : (
        <DataTable
          caption="Audit log"
          columns={["When", "Actor", "Action", "Target", { label: "From", optional: true }]}
          class="cards"
          footer={<Pager path={path} next={list.data.next_cursor} query={filtered ? filters : undefined} />}
        >
          {list.data.data.map((e) => (
            <tr id={`entry-${e.id}`}>
              <td data-label="When">{when(e.at)}</td>
              <td data-label="Actor">
                <Actor actor={e.actor} />
              </td>
              <td data-label="Action">
                <a href={`${path}?action=${encodeURIComponent(e.action)}`}>
                  <code>{e.action}</code>
                </a>
              </td>
              <td data-label="Target">
                {e.target.type} <code>{e.target.id}</code>
              </td>
              <td data-label="From" class="optional">
                {e.client_ip ?? <span class="muted">unknown address</span>}
                <br />
                <span class="muted">
                  request <code>{e.request_id}</code>
                </span>
              </td>
            </tr>
          ))}
        </DataTable>
      )}
    </>,
  );
}

export function registerAuditLog(dash: DashRouter) {
  dash.get("/projects/:project_id/audit-log", (c) => withProject(c, (project) => auditLogPage(c, project)));
}
