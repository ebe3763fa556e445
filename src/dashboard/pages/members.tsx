import type { z } from "@hono/zod-openapi";
import type { InviteSchema, MemberSchema } from "../../members/routes";
import type { Child } from "hono/jsx";
import { type ApiResult, type Page, type Problem, seg } from "../api";
import { canManageMembers, NotAllowed } from "../access";
import { type DashContext, type DashRouter, dashPath, formText, projectPath } from "../context";
import { ConfirmAction, ConfirmForm, Csrf, DataTable, Field, ProblemMessage, when } from "../components";
import { renderPage } from "../layout";
import { type Project, ProjectHeading, withProject } from "./project";

type Role = "owner" | "developer" | "viewer";
const ROLES: readonly Role[] = ["owner", "developer", "viewer"];
const ROLE_HINT: Record<Role, string> = {
  owner: "everything, members too",
  developer: "apps, builds, domains, deliveries and API keys",
  viewer: "reads only",
};

// What the API answers: its own response schemas, not copies.
type Member = z.infer<typeof MemberSchema>;
type Invite = z.infer<typeof InviteSchema>;

interface Notice {
  problem?: Problem | undefined;
  action?: string;
  done?: string;
  invite?: { email: string; role: string };
}

function RoleSelect({ id, name, value, label }: { id: string; name: string; value: Role; label: string }) {
  return (
    <>
      <label for={id} class="skip">
        {label}
      </label>
      <select id={id} name={name}>
        {ROLES.map((r) => (
          <option value={r} selected={r === value}>
            {r}
          </option>
        ))}
      </select>
    </>
  );
}

async function membersPage(c: DashContext, project: Project, notice: Notice = {}) {
  const pid = project.project_id;
  const manage = canManageMembers(c);
  const members: ApiResult<Page<Member>> = await c.get("api")("GET", `/projects/${seg(pid)}/members?limit=100`);
  const invites: ApiResult<Page<Invite>> | null = manage ? await c.get("api")("GET", `/projects/${seg(pid)}/invites?limit=100`) : null;
  const me = c.get("user")?.id;
  const csrf = c.get("csrf");
  const status = notice.problem ? (notice.problem.status === 409 ? 409 : notice.problem.status === 403 ? 403 : 400) : 200;
  return renderPage(
    c,
    { title: "Members", projectId: pid, tab: "members", status },
    <>
      <ProjectHeading project={project} title="Members" />
      <p class="muted">People who work on this project, and their role: {ROLES.map((r) => `${r} (${ROLE_HINT[r]})`).join("; ")}.</p>
      {notice.problem && <ProblemMessage problem={notice.problem} action={notice.action} />}
      {notice.done && (
        <div class="alert success" role="status">
          <p>{notice.done}</p>
        </div>
      )}
      {!members.ok ? (
        <ProblemMessage problem={members.problem} action="Loading members" />
      ) : members.data.data.length === 0 ? (
        <p>No members yet: invite the first owner below.</p>
      ) : (
        <DataTable caption="Members" columns={["Name", "Email", "Role", { label: "Member since", optional: true }]} actions>
          {members.data.data.map((m, _, all) => {
            const self = m.user_id === me;
            // The API refuses to remove the last owner (409 last_owner); the page does not offer it.
            const lastOwner = m.role === "owner" && all.filter((o) => o.role === "owner").length === 1;
            const who = m.name ?? m.email ?? m.user_id;
            return (
              <tr>
                <td>
                  {who}
                  {self && <span class="muted"> (you)</span>}
                </td>
                <td>{m.email ?? <span class="muted">none</span>}</td>
                <td>
                  {manage ? (
                    <form method="post" action={projectPath(pid, `/members/${m.member_id}/role`)} class="inline">
                      <Csrf token={csrf} />
                      <RoleSelect id={`role-${m.member_id}`} name="role" value={m.role} label={`Role of ${who}`} />
                      <button type="submit" class="secondary">
                        Change<span class="skip"> role of {who}</span>
                      </button>
                    </form>
                  ) : (
                    m.role
                  )}
                </td>
                <td class="optional">{when(m.created_at)}</td>
                <td>
                  {lastOwner ? (
                    <span class="muted">Last owner</span>
                  ) : (manage || self) && (
                    <ConfirmAction
                      id={`remove-${m.member_id}`}
                      label={self ? "Leave" : "Remove"}
                      href={projectPath(pid, `/members/${m.member_id}/remove`)}
                      action={projectPath(pid, `/members/${m.member_id}/remove`)}
                      csrf={csrf}
                      title={self ? "Leave this project?" : `Remove ${who}?`}
                      question={self ? <>You lose access to it at once.</> : <>They lose access to this project at once.</>}
                      confirmLabel={self ? "Leave project" : "Remove member"}
                    />
                  )}
                </td>
              </tr>
            );
          })}
        </DataTable>
      )}
      {!manage ? (
        <NotAllowed c={c} doing="inviting, removing or changing the role of members" />
      ) : (
        <>
          <InviteList pid={pid} invites={invites} csrf={csrf} />
          <section class="card" aria-labelledby="invite">
            <h2 id="invite">Invite someone</h2>
            <form method="post" action={projectPath(pid, "/members/invites")} class="stack">
              <Csrf token={csrf} />
              <Field
                label="Email"
                name="email"
                type="email"
                value={notice.invite?.email ?? ""}
                required
                maxlength={254}
                error={notice.action === "The invite was not sent" ? notice.problem?.fields.email : undefined}
                hint="They become a member when they sign in with this address, verified by their provider."
              />
              <Field label="Role" name="role">
                <select id="field-role" name="role">
                  {ROLES.map((r) => (
                    <option value={r} selected={r === (notice.invite?.role ?? "developer")}>
                      {r}: {ROLE_HINT[r]}
                    </option>
                  ))}
                </select>
              </Field>
              <div>
                <button type="submit">Invite</button>
              </div>
            </form>
          </section>
        </>
      )}
    </>,
  );
}

function InviteList({ pid, invites, csrf }: { pid: string; invites: ApiResult<Page<Invite>> | null; csrf: string }): Child {
  if (!invites) return null;
  if (!invites.ok) return <ProblemMessage problem={invites.problem} action="Loading invites" />;
  if (invites.data.data.length === 0) return <p class="muted">No open invites.</p>;
  return (
    <section aria-labelledby="invites">
      <h2 id="invites">Open invites</h2>
      <DataTable caption="Open invites" columns={["Email", "Role", "Expires"]} actions>
        {invites.data.data.map((i) => (
          <tr>
            <td>{i.email}</td>
            <td>{i.role}</td>
            <td>{when(i.expires_at)}</td>
            <td>
              <form method="post" action={projectPath(pid, `/members/invites/${i.invite_id}/withdraw`)} class="inline">
                <Csrf token={csrf} />
                <button type="submit" class="secondary">
                  Withdraw<span class="skip"> the invite of {i.email}</span>
                </button>
              </form>
            </td>
          </tr>
        ))}
      </DataTable>
    </section>
  );
}

const ID = /^[a-z]+_[0-9a-z]{30}$/;

export function registerMembers(dash: DashRouter) {
  dash.get("/projects/:project_id/members", (c) => withProject(c, (project) => membersPage(c, project)));

  dash.post("/projects/:project_id/members/invites", (c) =>
    withProject(c, async (project) => {
      const form = await c.req.parseBody();
      const invite = { email: formText(form, "email"), role: formText(form, "role") };
      const sent = await c.get("api")<Invite>("POST", `/projects/${seg(project.project_id)}/invites`, invite);
      if (!sent.ok) return membersPage(c, project, { problem: sent.problem, action: "The invite was not sent", invite });
      return membersPage(c, project, { done: `${sent.data.email} is invited as ${sent.data.role}: the invite is theirs when they sign in with that address.` });
    }),
  );

  dash.post("/projects/:project_id/members/invites/:invite_id/withdraw", (c) =>
    withProject(c, async (project) => {
      const id = c.req.param("invite_id");
      const withdrawn = await c.get("api")<Invite>("DELETE", `/projects/${seg(project.project_id)}/invites/${seg(id)}`);
      if (!withdrawn.ok) return membersPage(c, project, { problem: withdrawn.problem, action: "The invite was not withdrawn" });
      return membersPage(c, project, { done: `The invite of ${withdrawn.data.email} was withdrawn.` });
    }),
  );

  dash.post("/projects/:project_id/members/:member_id/role", (c) =>
    withProject(c, async (project) => {
      const role = formText(await c.req.parseBody(), "role");
      const changed = await c.get("api")<Member>("PATCH", `/projects/${seg(project.project_id)}/members/${seg(c.req.param("member_id"))}`, { role });
      if (!changed.ok) return membersPage(c, project, { problem: changed.problem, action: "The role was not changed" });
      return membersPage(c, project, { done: `${changed.data.name ?? changed.data.email ?? "The member"} is now ${changed.data.role}.` });
    }),
  );

  dash.get("/projects/:project_id/members/:member_id/remove", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const id = c.req.param("member_id");
      return renderPage(
        c,
        { title: "Remove member", projectId: pid, tab: "members" },
        <div class="card">
          <ConfirmForm
            id="remove"
            action={projectPath(pid, `/members/${ID.test(id) ? id : "invalid"}/remove`)}
            csrf={c.get("csrf")}
            title="Remove this member?"
            question={<>They lose access to this project at once (if it is you: you leave it).</>}
            confirmLabel="Remove"
            cancelHref={projectPath(pid, "/members")}
          />
        </div>,
      );
    }),
  );

  dash.post("/projects/:project_id/members/:member_id/remove", (c) =>
    withProject(c, async (project) => {
      const removed = await c.get("api")<Member>("DELETE", `/projects/${seg(project.project_id)}/members/${seg(c.req.param("member_id"))}`);
      if (!removed.ok) return membersPage(c, project, { problem: removed.problem, action: "The member was not removed" });
      // Whoever left no longer sees the project.
      if (removed.data.user_id === c.get("user")?.id) return c.redirect(dashPath("/projects"), 303);
      return membersPage(c, project, { done: `${removed.data.name ?? removed.data.email ?? "The member"} was removed.` });
    }),
  );
}
