import { DEFAULT_PERMISSIONS, type Permission, PERMISSIONS } from "../../auth/permissions";
import { DAY_MS } from "../../platform/time";
import { type ApiResult, listQuery, type Page, type Problem, seg } from "../api";
import type { CreatedServiceAccount, ProjectItem, ServiceAccountItem } from "../api-types";
import { type DashContext, type DashRouter, formText, projectPath } from "../context";
import {
  Badge,
  ConfirmAction,
  ConfirmForm,
  CopyValue,
  Csrf,
  DataTable,
  Field,
  Pager,
  ProblemMessage,
  when,
} from "../components";
import { LAST_USED_RESOLUTION_MS } from "../../auth/lookup";
import { can, NotAllowed } from "../access";
import { ago } from "../format";
import { takeFlash, setFlash } from "../flash";
import { renderPage } from "../layout";
import { ProjectHeading, withProject } from "./project";

/** Who made a key: it ends with them (when they leave, become a viewer, or the key that made it is revoked). */
function createdBy(a: ServiceAccountItem, all: readonly ServiceAccountItem[], me: string | undefined) {
  const by = a.created_by;
  if (by.kind === "operator") return "the operator";
  if (by.kind === "user") return by.id === me ? "you" : "a member";
  const parent = all.find((p) => p.id === by.id);
  return parent ? `key “${parent.name}”` : "another key";
}

/** The API allows at most 2 years (MAX_TOKEN_LIFETIME_MS); the picker offers whole days within it. */
const MAX_DAYS_AHEAD = 730;
const isoDate = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** A token expires at the end of the chosen day (UTC): "expires on 30 June" keeps working on 30 June. */
export const expiryOfDate = (date: string) => (/^\d{4}-\d{2}-\d{2}$/.test(date) ? `${date}T23:59:59Z` : date);

/** What each scope lets a token do, in words (the closed list of auth/permissions.ts). */
const SCOPE_TEXT: Record<Permission, string> = {
  "runs:invoke": "run the project's apps (/v4)",
  "builds:read": "read apps and builds",
  "builds:write": "create apps, start, report and cancel builds",
  "domains:read": "read custom domains",
  "domains:write": "add, validate and remove custom domains",
  "deliveries:read": "read webhook deliveries",
  "deliveries:write": "resend webhook deliveries (not a default: a resend sends a stored result again)",
  "service_accounts:write": "list, create and revoke API keys (within its own scopes and expiry)",
  "audit:read": "read the audit log",
  "usage:read": "read the runs list and usage figures",
};

function ScopeChoice({ selected, error }: { selected: readonly string[]; error: string | undefined }) {
  return (
    <fieldset aria-describedby={error ? "scopes-error" : undefined}>
      <legend>Scopes</legend>
      <p class="hint">What the token may do in this project. You can give only scopes you have yourself.</p>
      {PERMISSIONS.map((p) => (
        <label class="check">
          <input type="checkbox" name="scopes" value={p} checked={selected.includes(p)} /> <code>{p}</code>:{" "}
          {SCOPE_TEXT[p]}
        </label>
      ))}
      {error && (
        <p class="field-error" id="scopes-error">
          {error}
        </p>
      )}
    </fieldset>
  );
}

/** The first problem of the `scopes` field or one of its items (`scopes.0`). */
const scopesError = (problem: Problem | undefined) =>
  problem &&
  (Object.entries(problem.fields).find(([field]) => field === "scopes" || field.startsWith("scopes."))?.[1] ??
    (problem.code === "insufficient_scope" ? problem.detail : undefined));

interface Form {
  name: string;
  expiresOn: string;
  scopes: readonly string[];
  problem?: Problem;
  created?: CreatedServiceAccount;
  /** Just revoked (from the redirect after revoking): named from the list, never from the URL's text. */
  revokedId?: string | undefined;
}

function Status({ account, now }: { account: ServiceAccountItem; now: number }) {
  if (account.revoked_at) return <Badge tone="bad">Revoked</Badge>;
  if (Date.parse(account.expires_at) <= now) return <Badge tone="warn">Expired</Badge>;
  return <Badge tone="ok">Active</Badge>;
}

function NewToken({ account }: { account: CreatedServiceAccount }) {
  return (
    <section class="alert warning" aria-labelledby="new-token-title" role="status">
      <h2 id="new-token-title">Token for “{account.name}”</h2>
      <p>
        <strong>Copy this token now: it is shown only once.</strong> Store it as a secret (your CI's or platform's
        secret store), never in source control. If you lose it, create another and revoke this one.
      </p>
      <CopyValue id="new-token" value={account.token} label="token" />
    </section>
  );
}

async function apiKeysPage(c: DashContext, project: ProjectItem, form: Form) {
  const pid = project.project_id;
  const accounts: ApiResult<Page<ServiceAccountItem>> = await c.get("api")(
    "GET",
    `/projects/${seg(pid)}/service-accounts?${listQuery(c, 100)}`,
  );
  const now = c.var.scope.deps.now().getTime();
  const csrf = c.get("csrf");
  const revoked =
    form.revokedId && accounts.ok ? accounts.data.data.find((a) => a.id === form.revokedId && a.revoked_at) : undefined;
  return renderPage(
    c,
    { title: "API Keys", projectId: pid, tab: "api-keys", status: form.problem ? 400 : 200 },
    <>
      <ProjectHeading project={project} title="API Keys" />
      <p class="muted">
        Service accounts and their tokens, for running the project's apps (<code>/v4</code>) and for the management API
        (<code>/v2</code>), sent as <code>Authorization: Bearer &lt;token&gt;</code>; a token's scopes say which. Use
        one per environment, and rotate them.
      </p>
      {revoked && (
        <div class="alert success" role="status">
          <p>“{revoked.name}” was revoked; its token no longer works.</p>
        </div>
      )}
      {form.created && <NewToken account={form.created} />}
      {!can(c, "service_accounts:write") ? null : !accounts.ok ? (
        <ProblemMessage problem={accounts.problem} action="Loading service accounts" />
      ) : accounts.data.data.length === 0 ? (
        <p>No service accounts yet.</p>
      ) : (
        // Cards at phone width: every column stays readable and Revoke stays on screen.
        <DataTable
          caption="Service accounts"
          columns={[
            "Name",
            "Token",
            "Scopes",
            "Expires",
            { label: "Last used", optional: true },
            { label: "Created by", optional: true },
            "Status",
          ]}
          actions
          class="cards"
          footer={<Pager path={projectPath(pid, "/api-keys")} next={accounts.data.next_cursor} />}
        >
          {accounts.data.data.map((a) => (
            <tr>
              <td data-label="Name">{a.name}</td>
              <td data-label="Token">
                <code>{a.token_prefix}…</code>
              </td>
              <td data-label="Scopes">
                <ul class="scopes">
                  {a.scopes.map((p) => (
                    <li>
                      <code>{p}</code>
                    </li>
                  ))}
                </ul>
              </td>
              <td data-label="Expires">{when(a.expires_at)}</td>
              <td class="optional" data-label="Last used">
                {a.last_used_at ? (
                  <>
                    {ago(a.last_used_at, now, LAST_USED_RESOLUTION_MS)}
                    <br />
                    <span class="muted">{when(a.last_used_at)}</span>
                  </>
                ) : (
                  when(null)
                )}
              </td>
              <td class="optional" data-label="Created by">
                {createdBy(a, accounts.data.data, c.get("user")?.id)}
              </td>
              <td data-label="Status">
                <Status account={a} now={now} />
              </td>
              <td>
                {!a.revoked_at && can(c, "service_accounts:write") && (
                  <ConfirmAction
                    id={`revoke-${a.id}`}
                    label="Revoke"
                    href={projectPath(pid, `/api-keys/${a.id}/revoke`)}
                    action={projectPath(pid, `/api-keys/${a.id}/revoke`)}
                    csrf={csrf}
                    title={`Revoke “${a.name}”?`}
                    question={
                      <>
                        Its token ({a.token_prefix}…) stops working at once, and so do the keys it created. This cannot
                        be undone.
                      </>
                    }
                    confirmLabel="Revoke"
                  />
                )}
              </td>
            </tr>
          ))}
        </DataTable>
      )}
      {accounts.ok && accounts.data.data.length > 0 && (
        <p class="muted">
          “Last used” is written at most once a minute per key, so it may trail a key's latest use by up to a minute;
          every run and who made it is under <a href={projectPath(pid, "/runs")}>Runs</a>.
        </p>
      )}
      {!can(c, "service_accounts:write") ? (
        <NotAllowed c={c} doing="seeing, creating or revoking service accounts" />
      ) : (
        <section class="card" aria-labelledby="create-key">
          <h2 id="create-key">Create a service account</h2>
          {form.problem && <ProblemMessage problem={form.problem} action="The service account was not created" />}
          <form method="post" action={projectPath(pid, "/api-keys")} class="stack">
            <Csrf token={csrf} />
            <Field
              label="Name"
              name="name"
              value={form.name}
              required
              maxlength={100}
              error={form.problem?.fields.name}
              hint="What uses it, for example “ci-production”."
            />
            <Field
              label="Expiry date"
              name="expires_on"
              type="date"
              value={form.expiresOn}
              required
              min={isoDate(now + DAY_MS)}
              max={isoDate(now + MAX_DAYS_AHEAD * DAY_MS)}
              error={form.problem?.fields.expires_at}
              hint="The token stops working at the end of this day (UTC). At most 2 years ahead."
            />
            <ScopeChoice selected={form.scopes} error={scopesError(form.problem)} />
            <div>
              <button type="submit">Create service account</button>
            </div>
          </form>
        </section>
      )}
    </>,
  );
}

/** The flash that carries a new token to the API Keys page of its project (and no other page). */
const NEW_TOKEN_FLASH = (projectId: string) => `api-keys:${projectId}`;

export function registerApiKeys(dash: DashRouter) {
  dash.get("/projects/:project_id/api-keys", (c) =>
    withProject(c, async (project) => {
      const created = await takeFlash<CreatedServiceAccount>(c, NEW_TOKEN_FLASH(project.project_id));
      return apiKeysPage(c, project, {
        name: "",
        expiresOn: "",
        scopes: DEFAULT_PERMISSIONS,
        revokedId: c.req.query("revoked"),
        created,
      });
    }),
  );

  dash.post("/projects/:project_id/api-keys", (c) =>
    withProject(c, async (project) => {
      const form = await c.req.parseBody({ all: true });
      const name = formText(form, "name");
      const expiresOn = formText(form, "expires_on");
      const checked = form.scopes;
      // Unchecking every box asks for no scopes (the API refuses that), not for the defaults.
      const scopes = (Array.isArray(checked) ? checked : checked === undefined ? [] : [checked]).filter(
        (v): v is string => typeof v === "string",
      );
      const created = await c.get("api")<CreatedServiceAccount>(
        "POST",
        `/projects/${seg(project.project_id)}/service-accounts`,
        {
          name,
          expires_at: expiryOfDate(expiresOn),
          scopes,
        },
      );
      if (!created.ok) return apiKeysPage(c, project, { name, expiresOn, scopes, problem: created.problem });
      // POST/redirect/GET: a reload shows the list instead of posting again (a second key). The token
      // crosses the redirect sealed in a one-time cookie, never in the URL or a history entry.
      await setFlash(c, NEW_TOKEN_FLASH(project.project_id), created.data);
      return c.redirect(projectPath(project.project_id, "/api-keys"), 303);
    }),
  );

  dash.get("/projects/:project_id/api-keys/:id/revoke", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      return renderPage(
        c,
        { title: "Revoke service account", projectId: pid, tab: "api-keys" },
        <div class="card">
          <ConfirmForm
            id="revoke"
            action={projectPath(pid, `/api-keys/${c.req.param("id")}/revoke`)}
            csrf={c.get("csrf")}
            title="Revoke this service account?"
            question={<>Its token stops working at once, and so do the keys it created. This cannot be undone.</>}
            confirmLabel="Revoke"
            cancelHref={projectPath(pid, "/api-keys")}
          />
        </div>,
      );
    }),
  );

  dash.post("/projects/:project_id/api-keys/:id/revoke", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const id = c.req.param("id");
      const revoked = await c.get("api")<ServiceAccountItem>(
        "DELETE",
        `/projects/${seg(pid)}/service-accounts/${seg(id)}`,
      );
      if (!revoked.ok) {
        return renderPage(
          c,
          { title: "API Keys", projectId: pid, tab: "api-keys", status: revoked.problem.status === 404 ? 404 : 400 },
          <>
            <ProjectHeading project={project} title="API Keys" />
            <ProblemMessage problem={revoked.problem} action="The service account was not revoked" />
            <p>
              <a href={projectPath(pid, "/api-keys")}>Back to API Keys</a>
            </p>
          </>,
        );
      }
      return c.redirect(projectPath(pid, `/api-keys?revoked=${encodeURIComponent(revoked.data.id)}`), 303);
    }),
  );
}
