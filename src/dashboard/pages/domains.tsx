import { type ApiResult, listQuery, type Page, type Problem, seg } from "../api";
import type { DomainItem, ProjectItem } from "../api-types";
import { type DashContext, type DashRouter, formText, projectPath } from "../context";
import {
  CloseDialog,
  ConfirmAction,
  ConfirmForm,
  Csrf,
  DataTable,
  Dialog,
  DialogLink,
  Field,
  Pager,
  ProblemMessage,
  when,
} from "../components";
import { can, NotAllowed } from "../access";
import { renderPage } from "../layout";
import { CheckResult, DnsRecord, domainPath, StatusBadge, StatusFacts, ValidateForm } from "./domain-parts";
import { ProjectHeading, withProject } from "./project";

/** Only a name that could be a hostname is echoed back from the URL ("… was removed"). */
const HOSTNAME = /^[a-z0-9.-]{1,253}$/;

/** The Remove button with its confirmation (a dialog, or a page without script), on the list and a domain's page. */
const RemoveDomain = (props: { id: string; pid: string; domain: string; csrf: string }) => (
  <ConfirmAction
    id={props.id}
    label="Remove"
    href={domainPath(props.pid, props.domain, "/remove")}
    action={domainPath(props.pid, props.domain, "/remove")}
    csrf={props.csrf}
    title={`Remove ${props.domain}?`}
    question={<>It stops being served at once, and its certificate is removed. You can add it again later.</>}
    confirmLabel="Remove domain"
  />
);

interface ListForm {
  domain: string;
  region: string;
  problem?: Problem;
  removed?: string | undefined;
}

async function domainsPage(c: DashContext, project: ProjectItem, form: ListForm) {
  const pid = project.project_id;
  const list: ApiResult<Page<DomainItem>> = await c.get("api")(
    "GET",
    `/projects/${seg(pid)}/domains?${listQuery(c, 100)}`,
  );
  const regions = c.var.scope.config.regions;
  const now = c.var.scope.deps.now().getTime();
  const csrf = c.get("csrf");
  const removed =
    form.removed && HOSTNAME.test(form.removed) && list.ok && !list.data.data.some((d) => d.domain === form.removed)
      ? form.removed
      : undefined;
  return renderPage(
    c,
    {
      title: "Domains",
      projectId: pid,
      tab: "domains",
      status: form.problem ? (form.problem.status === 409 ? 409 : 400) : 200,
    },
    <>
      <ProjectHeading project={project} title="Domains" />
      <p class="muted">
        Custom domains serve the project's runs. Each needs one DNS record at your provider, then validation.
      </p>
      {removed && (
        <div class="alert success" role="status">
          <p>{removed} was removed; it is no longer served.</p>
        </div>
      )}
      {!list.ok ? (
        <ProblemMessage problem={list.problem} action="Loading domains" />
      ) : list.data.data.length === 0 ? (
        <p>No custom domains yet.</p>
      ) : (
        <DataTable
          caption="Custom domains"
          columns={["Domain", "Status", { label: "Region", optional: true }, { label: "Last attempt", optional: true }]}
          actions
          class="cards"
          footer={<Pager path={projectPath(pid, "/domains")} next={list.data.next_cursor} />}
        >
          {list.data.data.map((d, i) => (
            <tr id={`domain-${i}`}>
              <td data-label="Domain">
                <a href={domainPath(pid, d.domain)}>{d.domain}</a>
              </td>
              <td data-label="Status">
                <StatusBadge domain={d} />
              </td>
              <td class="optional" data-label="Region">
                {d.region}
              </td>
              <td class="optional" data-label="Last attempt">
                {when(d.last_checked_at)}
              </td>
              <td>
                <div class="row-actions">
                  <DialogLink
                    dialog={`status-${i}`}
                    href={domainPath(pid, d.domain, "/status")}
                    label={
                      <>
                        Validation status<span class="skip"> of {d.domain}</span>
                      </>
                    }
                  />
                  {can(c, "domains:write") && (
                    <RemoveDomain id={`remove-${i}`} pid={pid} domain={d.domain} csrf={csrf} />
                  )}
                </div>
                <Dialog id={`status-${i}`}>
                  <h2 id={`status-${i}-title`}>Validation status of {d.domain}</h2>
                  <StatusFacts domain={d} now={now} />
                  <div class="actions">
                    {can(c, "domains:write") && (d.status !== "validated" || d.certificate_status !== "active") ? (
                      <ValidateForm pid={pid} domain={d} csrf={csrf} />
                    ) : null}
                    <a class="button secondary" href={domainPath(pid, d.domain)}>
                      DNS record
                    </a>
                    <CloseDialog />
                  </div>
                </Dialog>
              </td>
            </tr>
          ))}
        </DataTable>
      )}
      {!can(c, "domains:write") ? (
        <NotAllowed c={c} doing="adding, validating or removing domains" />
      ) : (
        <section class="card" aria-labelledby="add-domain">
          <h2 id="add-domain">Add a domain</h2>
          {form.problem && <ProblemMessage problem={form.problem} action="The domain was not added" />}
          <form method="post" action={projectPath(pid, "/domains")} class="stack">
            <Csrf token={csrf} />
            <Field
              label="Domain"
              name="domain"
              value={form.domain}
              required
              maxlength={253}
              error={form.problem?.fields.domain}
              hint="Prefer a subdomain (app.example.com): any DNS provider can point it at us with a CNAME. An apex (example.com) cannot hold a CNAME and needs your provider's ALIAS, ANAME or CNAME flattening."
            />
            <Field
              label="Region"
              name="region"
              error={form.problem?.fields.region}
              hint="The domain always resolves to this region."
            >
              <select
                id="field-region"
                name="region"
                required
                aria-describedby={
                  form.problem?.fields.region ? "field-region-hint field-region-error" : "field-region-hint"
                }
                aria-invalid={form.problem?.fields.region ? "true" : undefined}
              >
                {regions.map((r) => (
                  <option value={r} selected={r === form.region}>
                    {r}
                  </option>
                ))}
              </select>
            </Field>
            <div>
              <button type="submit">Add domain</button>
            </div>
          </form>
        </section>
      )}
    </>,
  );
}

/** A domain's page: the DNS record to create, its validation status, and its actions. */
async function domainPage(
  c: DashContext,
  project: ProjectItem,
  options: { added?: boolean; checked?: boolean; problem?: Problem } = {},
) {
  const pid = project.project_id;
  const name = c.req.param("domain") ?? "";
  const read = await c.get("api")<DomainItem>("GET", `/projects/${seg(pid)}/domains/${seg(name)}`);
  if (!read.ok) return domainNotFound(c, pid, read.problem);
  const d = read.data;
  const csrf = c.get("csrf");
  return renderPage(
    c,
    { title: d.domain, projectId: pid, tab: "domains", status: options.problem ? 400 : 200 },
    <>
      <p>
        <a href={projectPath(pid, "/domains")}>← Domains</a>
      </p>
      <ProjectHeading project={project} title={d.domain} />
      {options.added && d.status === "pending" && (
        <div class="alert success" role="status">
          <p>
            <strong>{d.domain} was added.</strong> Create the DNS record below at your DNS provider, then press Validate
            Domain. We also check every 30 minutes until {when(d.auto_validation_ends_at)}.
          </p>
        </div>
      )}
      {options.checked && <CheckResult domain={d} />}
      {options.problem && <ProblemMessage problem={options.problem} action="The domain was not validated" />}
      <p>
        <StatusBadge domain={d} />{" "}
        <span class="muted">
          region {d.region}, added {when(d.created_at)}
        </span>
      </p>
      <section aria-labelledby="record-title">
        <h2 id="record-title">DNS record to create</h2>
        <DnsRecord domain={d} idPrefix="record" />
      </section>
      <section aria-labelledby="status-title">
        <h2 id="status-title">Validation status</h2>
        <StatusFacts domain={d} now={c.var.scope.deps.now().getTime()} />
        <div class="actions">
          {can(c, "domains:write") && <ValidateForm pid={pid} domain={d} csrf={csrf} />}
          {can(c, "domains:write") && <RemoveDomain id="remove" pid={pid} domain={d.domain} csrf={csrf} />}
        </div>
      </section>
    </>,
  );
}

function domainNotFound(c: DashContext, pid: string, problem: Problem) {
  return renderPage(
    c,
    { title: "Domain not found", projectId: pid, tab: "domains", status: problem.status === 404 ? 404 : 400 },
    <>
      <h1>Domain not found</h1>
      <ProblemMessage problem={problem} />
      <p>
        <a href={projectPath(pid, "/domains")}>All domains of the project</a>
      </p>
    </>,
  );
}

export function registerDomains(dash: DashRouter) {
  dash.get("/projects/:project_id/domains", (c) =>
    withProject(c, (project) => domainsPage(c, project, { domain: "", region: "", removed: c.req.query("removed") })),
  );

  dash.post("/projects/:project_id/domains", (c) =>
    withProject(c, async (project) => {
      const form = await c.req.parseBody();
      const domain = formText(form, "domain").trim();
      const region = formText(form, "region");
      const created = await c.get("api")<DomainItem>("POST", `/projects/${seg(project.project_id)}/domains`, {
        domain,
        region,
      });
      if (!created.ok) return domainsPage(c, project, { domain, region, problem: created.problem });
      return c.redirect(domainPath(project.project_id, created.data.domain, "?added=1"), 303);
    }),
  );

  dash.get("/projects/:project_id/domains/:domain", (c) =>
    withProject(c, (project) =>
      domainPage(c, project, { added: c.req.query("added") === "1", checked: c.req.query("checked") === "1" }),
    ),
  );

  // The validation status dialog as a page, for browsers without script.
  dash.get("/projects/:project_id/domains/:domain/status", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const read = await c.get("api")<DomainItem>("GET", `/projects/${seg(pid)}/domains/${seg(c.req.param("domain"))}`);
      if (!read.ok) return domainNotFound(c, pid, read.problem);
      const d = read.data;
      return renderPage(
        c,
        { title: `Validation status of ${d.domain}`, projectId: pid, tab: "domains" },
        <div class="card">
          <h1>Validation status of {d.domain}</h1>
          <StatusFacts domain={d} now={c.var.scope.deps.now().getTime()} />
          <div class="actions">
            {can(c, "domains:write") && <ValidateForm pid={pid} domain={d} csrf={c.get("csrf")} />}
            <a class="button secondary" href={domainPath(pid, d.domain)}>
              DNS record
            </a>
            <a class="button secondary" href={projectPath(pid, "/domains")}>
              Back to Domains
            </a>
          </div>
        </div>,
      );
    }),
  );

  dash.post("/projects/:project_id/domains/:domain/validate", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const name = c.req.param("domain");
      const checked = await c.get("api")<DomainItem>("POST", `/projects/${seg(pid)}/domains/${seg(name)}/validate`);
      if (!checked.ok) {
        return checked.problem.status === 404
          ? domainNotFound(c, pid, checked.problem)
          : domainPage(c, project, { problem: checked.problem });
      }
      // Back to the domain's page (a reload does not validate again), which reads the result from the domain.
      return c.redirect(domainPath(pid, checked.data.domain, "?checked=1"), 303);
    }),
  );

  dash.get("/projects/:project_id/domains/:domain/remove", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      // Named from the API's answer, not from the URL's text, and an unknown domain is a not-found page.
      const read = await c.get("api")<DomainItem>("GET", `/projects/${seg(pid)}/domains/${seg(c.req.param("domain"))}`);
      if (!read.ok) return domainNotFound(c, pid, read.problem);
      const name = read.data.domain;
      return renderPage(
        c,
        { title: "Remove domain", projectId: pid, tab: "domains" },
        <div class="card">
          <ConfirmForm
            id="remove"
            action={domainPath(pid, name, "/remove")}
            csrf={c.get("csrf")}
            title={`Remove ${name}?`}
            question={<>It stops being served at once, and its certificate is removed. You can add it again later.</>}
            confirmLabel="Remove domain"
            cancelHref={domainPath(pid, name)}
          />
        </div>,
      );
    }),
  );

  dash.post("/projects/:project_id/domains/:domain/remove", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const removed = await c.get("api")<DomainItem>(
        "DELETE",
        `/projects/${seg(pid)}/domains/${seg(c.req.param("domain"))}`,
      );
      if (!removed.ok) {
        return renderPage(
          c,
          { title: "Domains", projectId: pid, tab: "domains", status: removed.problem.status === 404 ? 404 : 400 },
          <>
            <ProjectHeading project={project} title="Domains" />
            <ProblemMessage problem={removed.problem} action="The domain was not removed" />
            <p>
              <a href={projectPath(pid, "/domains")}>Back to Domains</a>
            </p>
          </>,
        );
      }
      return c.redirect(projectPath(pid, `/domains?removed=${seg(removed.data.domain)}`), 303);
    }),
  );
}
