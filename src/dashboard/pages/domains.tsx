import { type ApiResult, listQuery, type Page, type Problem, seg } from "../api";
import { type DashContext, type DashRouter, projectPath } from "../context";
import { Badge, type BadgeTone, ConfirmAction, ConfirmForm, CopyValue, Csrf, Dialog, DialogLink, CloseDialog, Field, Pager, ProblemMessage, when } from "../components";
import { renderPage } from "../layout";
import { type Project, ProjectHeading, withProject } from "./project";

export interface Domain {
  domain: string;
  region: string;
  status: "pending" | "validated" | "failed";
  dns_record: { type: "CNAME" | "ALIAS"; name: string; value: string };
  last_error: { code: string; message: string } | null;
  last_checked_at: string | null;
  next_check_at: string | null;
  auto_validation_ends_at: string;
  validated_at: string | null;
  certificate_status: "none" | "pending" | "active" | "failed";
  created_at: string;
}

const STATUS_TONE: Record<Domain["status"], BadgeTone> = { pending: "info", validated: "ok", failed: "bad" };
const STATUS_LABEL: Record<Domain["status"], string> = { pending: "Pending", validated: "Validated", failed: "Failed" };
const CERTIFICATE_LABEL: Record<Domain["certificate_status"], string> = {
  none: "Not requested yet (after validation)",
  pending: "Being issued",
  active: "Active",
  failed: "Failed: Validate Domain asks again",
};

/** Why no automatic attempt is planned (the API plans them only for a pending domain within its window). */
const NO_NEXT_CHECK: Record<Domain["status"], string> = {
  validated: "none needed",
  failed: "none while it is failed: correct the record, then Validate Domain",
  pending: "none: automatic attempts have ended",
};

/** Only a name that could be a hostname is echoed back from the URL ("… was removed"). */
const HOSTNAME = /^[a-z0-9.-]{1,253}$/;

const StatusBadge = ({ domain }: { domain: Domain }) => <Badge tone={STATUS_TONE[domain.status]}>{STATUS_LABEL[domain.status]}</Badge>;

const domainPath = (pid: string, name: string, rest = "") => projectPath(pid, `/domains/${seg(name)}${rest}`);

/** The record to create at the DNS provider, each part copyable; for an apex, what to use instead of a CNAME. */
function DnsRecord({ domain, idPrefix }: { domain: Domain; idPrefix: string }) {
  const r = domain.dns_record;
  return (
    <>
      <div class="table-wrap">
        <table class="record cards">
          <caption class="skip">DNS record to create for {domain.domain}</caption>
          <thead>
            <tr>
              <th scope="col">Type</th>
              <th scope="col">Name</th>
              <th scope="col">Value (target)</th>
            </tr>
          </thead>
          <tbody>
            <tr>
              <td data-label="Type">
                <code>{r.type}</code>
              </td>
              <td data-label="Name">
                <CopyValue id={`${idPrefix}-name`} value={r.name} label="record name" />
              </td>
              <td data-label="Value (target)">
                <CopyValue id={`${idPrefix}-value`} value={r.value} label="record value" />
              </td>
            </tr>
          </tbody>
        </table>
      </div>
      {r.type === "ALIAS" ? (
        <p class="hint">
          <strong>{domain.domain} is an apex</strong> (the zone's own name), which cannot hold a CNAME. Create an <code>ALIAS</code>{" "}
          record, called <code>ANAME</code> or “CNAME flattening” by some providers, pointing at the value above. If your provider has
          none, use a subdomain such as <code>www.{domain.domain}</code> instead.
        </p>
      ) : (
        <p class="hint">
          Create a <code>CNAME</code> record and remove any other record (A, AAAA, another CNAME) at that name. Some providers want only
          the part before your zone in the Name field.
        </p>
      )}
    </>
  );
}

/** The validation status: the dialog's content and the no-script page's, the same facts in the same order. */
function StatusFacts({ domain, now }: { domain: Domain; now: number }) {
  const windowEnded = Date.parse(domain.auto_validation_ends_at) <= now;
  return (
    <dl class="facts">
      <dt>Status</dt>
      <dd>
        <StatusBadge domain={domain} />
        {domain.validated_at && <> since {when(domain.validated_at)}</>}
      </dd>
      <dt>Last error</dt>
      <dd>
        {domain.last_error ? (
          <>
            <code>{domain.last_error.code}</code>: {domain.last_error.message}
          </>
        ) : (
          <span class="muted">none</span>
        )}
      </dd>
      <dt>Last attempt</dt>
      <dd>{when(domain.last_checked_at)}</dd>
      <dt>Next automatic attempt</dt>
      <dd>
        {/* The API keeps a planned time the cron has not reached yet; past the window, none will come. */}
        {domain.next_check_at && !windowEnded ? (
          when(domain.next_check_at)
        ) : (
          <span class="muted">{NO_NEXT_CHECK[domain.status]}</span>
        )}
      </dd>
      <dt>Automatic attempts end</dt>
      <dd>
        {when(domain.auto_validation_ends_at)}
        {windowEnded && domain.status !== "validated" && <span class="muted"> (ended: use Validate Domain)</span>}
      </dd>
      <dt>Certificate</dt>
      <dd>{CERTIFICATE_LABEL[domain.certificate_status]}</dd>
    </dl>
  );
}

function ValidateForm({ pid, domain, csrf }: { pid: string; domain: Domain; csrf: string }) {
  return (
    <form method="post" action={domainPath(pid, domain.domain, "/validate")} class="inline">
      <Csrf token={csrf} />
      <button type="submit">
        Validate Domain<span class="skip"> {domain.domain}</span>
      </button>
    </form>
  );
}

interface ListForm {
  domain: string;
  region: string;
  problem?: Problem;
  removed?: string | undefined;
}

async function domainsPage(c: DashContext, project: Project, form: ListForm) {
  const pid = project.project_id;
  const list: ApiResult<Page<Domain>> = await c.get("api")("GET", `/projects/${seg(pid)}/domains?${listQuery(c, 100)}`);
  const regions = c.get("config").regions;
  const now = c.get("deps").now().getTime();
  const csrf = c.get("csrf");
  const removed = form.removed && HOSTNAME.test(form.removed) && list.ok && !list.data.data.some((d) => d.domain === form.removed) ? form.removed : undefined;
  return renderPage(
    c,
    { title: "Domains", projectId: pid, tab: "domains", status: form.problem ? (form.problem.status === 409 ? 409 : 400) : 200 },
    <>
      <ProjectHeading project={project} title="Domains" />
      <p class="muted">Custom domains serve the project's runs. Each needs one DNS record at your provider, then validation.</p>
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
        <div class="table-wrap">
          <table class="cards">
            <caption class="skip">Custom domains</caption>
            <thead>
              <tr>
                <th scope="col">Domain</th>
                <th scope="col">Status</th>
                <th scope="col" class="optional">Region</th>
                <th scope="col" class="optional">Last attempt</th>
                <th scope="col">
                  <span class="skip">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.data.map((d, i) => (
                <tr id={`domain-${i}`}>
                  <td data-label="Domain">
                    <a href={domainPath(pid, d.domain)}>{d.domain}</a>
                  </td>
                  <td data-label="Status">
                    <StatusBadge domain={d} />
                  </td>
                  <td class="optional" data-label="Region">{d.region}</td>
                  <td class="optional" data-label="Last attempt">{when(d.last_checked_at)}</td>
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
                      <ConfirmAction
                        id={`remove-${i}`}
                        label="Remove"
                        href={domainPath(pid, d.domain, "/remove")}
                        action={domainPath(pid, d.domain, "/remove")}
                        csrf={csrf}
                        title={`Remove ${d.domain}?`}
                        question={<>It stops being served at once, and its certificate is removed. You can add it again later.</>}
                        confirmLabel="Remove domain"
                      />
                    </div>
                    <Dialog id={`status-${i}`}>
                      <h2 id={`status-${i}-title`}>Validation status of {d.domain}</h2>
                      <StatusFacts domain={d} now={now} />
                      <div class="actions">
                        {d.status !== "validated" || d.certificate_status !== "active" ? <ValidateForm pid={pid} domain={d} csrf={csrf} /> : null}
                        <a class="button secondary" href={domainPath(pid, d.domain)}>
                          DNS record
                        </a>
                        <CloseDialog />
                      </div>
                    </Dialog>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <Pager path={projectPath(pid, "/domains")} next={list.data.next_cursor} />
        </div>
      )}
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
          <Field label="Region" name="region" error={form.problem?.fields.region} hint="The domain always resolves to this region.">
            <select
              id="field-region"
              name="region"
              required
              aria-describedby={form.problem?.fields.region ? "field-region-hint field-region-error" : "field-region-hint"}
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
    </>,
  );
}

/** A domain's page: the DNS record to create, its validation status, and its actions. */
async function domainPage(c: DashContext, project: Project, options: { checked?: boolean; problem?: Problem } = {}) {
  const pid = project.project_id;
  const name = c.req.param("domain") ?? "";
  const read = await c.get("api")<Domain>("GET", `/projects/${seg(pid)}/domains/${seg(name)}`);
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
      {options.checked && <CheckResult domain={d} />}
      {options.problem && <ProblemMessage problem={options.problem} action="The domain was not validated" />}
      <p>
        <StatusBadge domain={d} /> <span class="muted">region {d.region}, added {when(d.created_at)}</span>
      </p>
      <section aria-labelledby="record-title">
        <h2 id="record-title">DNS record to create</h2>
        <DnsRecord domain={d} idPrefix="record" />
      </section>
      <section aria-labelledby="status-title">
        <h2 id="status-title">Validation status</h2>
        <StatusFacts domain={d} now={c.get("deps").now().getTime()} />
        <div class="actions">
          <ValidateForm pid={pid} domain={d} csrf={csrf} />
          <ConfirmAction
            id="remove"
            label="Remove"
            href={domainPath(pid, d.domain, "/remove")}
            action={domainPath(pid, d.domain, "/remove")}
            csrf={csrf}
            title={`Remove ${d.domain}?`}
            question={<>It stops being served at once, and its certificate is removed. You can add it again later.</>}
            confirmLabel="Remove domain"
          />
        </div>
      </section>
    </>,
  );
}

/** What a manual validation found, said first on the page it returns to. */
function CheckResult({ domain }: { domain: Domain }) {
  if (domain.status === "validated") {
    return (
      <div class="alert success" role="status">
        <p>
          <strong>Validated.</strong> {domain.domain} points at us; it is served once its certificate is active.
        </p>
      </div>
    );
  }
  return (
    <div class="alert error" role="alert">
      <p>
        <strong>Not validated: {STATUS_LABEL[domain.status]}.</strong>{" "}
        {domain.last_error ? (
          <>
            <code>{domain.last_error.code}</code>: {domain.last_error.message}
          </>
        ) : (
          "The check found nothing to report; try again in a few minutes."
        )}
      </p>
    </div>
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
      const domain = typeof form.domain === "string" ? form.domain.trim() : "";
      const region = typeof form.region === "string" ? form.region : "";
      const created = await c.get("api")<Domain>("POST", `/projects/${seg(project.project_id)}/domains`, { domain, region });
      if (!created.ok) return domainsPage(c, project, { domain, region, problem: created.problem });
      return c.redirect(domainPath(project.project_id, created.data.domain), 303);
    }),
  );

  dash.get("/projects/:project_id/domains/:domain", (c) => withProject(c, (project) => domainPage(c, project, { checked: c.req.query("checked") === "1" })));

  // The validation status dialog as a page, for browsers without script.
  dash.get("/projects/:project_id/domains/:domain/status", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const read = await c.get("api")<Domain>("GET", `/projects/${seg(pid)}/domains/${seg(c.req.param("domain"))}`);
      if (!read.ok) return domainNotFound(c, pid, read.problem);
      const d = read.data;
      return renderPage(
        c,
        { title: `Validation status of ${d.domain}`, projectId: pid, tab: "domains" },
        <div class="card">
          <h1>Validation status of {d.domain}</h1>
          <StatusFacts domain={d} now={c.get("deps").now().getTime()} />
          <div class="actions">
            <ValidateForm pid={pid} domain={d} csrf={c.get("csrf")} />
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
      const checked = await c.get("api")<Domain>("POST", `/projects/${seg(pid)}/domains/${seg(name)}/validate`);
      if (!checked.ok) {
        return checked.problem.status === 404 ? domainNotFound(c, pid, checked.problem) : domainPage(c, project, { problem: checked.problem });
      }
      // Back to the domain's page (a reload does not validate again), which reads the result from the domain.
      return c.redirect(domainPath(pid, checked.data.domain, "?checked=1"), 303);
    }),
  );

  dash.get("/projects/:project_id/domains/:domain/remove", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      // Named from the API's answer, not from the URL's text, and an unknown domain is a not-found page.
      const read = await c.get("api")<Domain>("GET", `/projects/${seg(pid)}/domains/${seg(c.req.param("domain"))}`);
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
      const removed = await c.get("api")<Domain>("DELETE", `/projects/${seg(pid)}/domains/${seg(c.req.param("domain"))}`);
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
