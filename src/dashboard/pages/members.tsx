import { ROLE_PERMISSIONS } from "../../auth/roles";
import { ROLES, type Role } from "../../db/schema";
import type { Child } from "hono/jsx";
import { type ApiResult, type Page, type Problem, seg } from "../api";
import type { ChangedMember, Invite, Member, ProjectItem, ServiceAccountItem as MemberToken } from "../api-types";
import { canManageMembers, NotAllowed } from "../access";
import { type DashContext, type DashRouter, dashPath, formText, projectPath } from "../context";
import { ConfirmForm, Csrf, DataTable, Field, ProblemMessage, when } from "../components";
import { renderPage } from "../layout";
import { ProjectHeading, withProject } from "./project";

const ROLE_HINT: Record<Role, string> = {
  owner: "everything, members too",
  developer: "apps, builds, domains, deliveries and API keys",
  viewer: "reads only; the API keys they created end",
};

/** A role that may not create tokens: a member moved to it loses the tokens they created. */
const endsTokens = (role: Role) => !ROLE_PERMISSIONS[role].includes("service_accounts:write");

/**
 * The working tokens that end if `userId` leaves the project or becomes a viewer: those they created
 * and those created by them (the API's `creator` filter). Null when the caller may not list tokens.
 */
async function tokensEndingWith(
  c: DashContext,
  pid: string,
  userId: string,
): Promise<{ tokens: MemberToken[]; more: boolean } | null> {
  const listed: ApiResult<Page<MemberToken>> = await c.get("api")(
    "GET",
    `/projects/${seg(pid)}/service-accounts?limit=100&creator=${seg(userId)}`,
  );
  if (!listed.ok) return null;
  const now = c.var.scope.deps.now().getTime();
  const tokens = listed.data.data.filter((a) => a.revoked_at === null && new Date(a.expires_at).getTime() > now);
  return { tokens, more: listed.data.next_cursor !== null };
}

/** Says, before it is confirmed, which tokens a removal or a move to viewer ends. */
function EndingTokens({ ending, who }: { ending: Awaited<ReturnType<typeof tokensEndingWith>>; who: string }) {
  if (ending === null) return <p>Any API keys {who} created, and the keys those created, stop working too.</p>;
  if (ending.tokens.length === 0 && !ending.more)
    return <p>{who} created no API key that is still working: none ends.</p>;
  return (
    <>
      <p>
        {ending.more ? "More than " : ""}
        {ending.tokens.length} API key{ending.tokens.length === 1 && !ending.more ? "" : "s"} created by {who} (or by
        their keys) stop working at once:
      </p>
      <ul class="ending-tokens">
        {ending.tokens.map((a) => (
          <li>
            {a.name} <code>{a.token_prefix}…</code>
          </li>
        ))}
      </ul>
    </>
  );
}

const endedText = (ended: ChangedMember["ended_service_accounts"]) =>
  ended.length === 0
    ? ""
    : ` ${ended.length} API key${ended.length === 1 ? "" : "s"} they created stopped working: ${ended.map((a) => `“${a.name}”`).join(", ")}.`;

async function findMember(c: DashContext, pid: string, memberId: string): Promise<Member | undefined> {
  let cursor: string | null = null;
  // Bounded: ten pages of 100 members.
  for (let i = 0; i < 10; i++) {
    const listed: ApiResult<Page<Member>> = await c.get("api")(
      "GET",
      `/projects/${seg(pid)}/members?limit=100${cursor ? `&cursor=${seg(cursor)}` : ""}`,
    );
    if (!listed.ok) return undefined;
    const found = listed.data.data.find((m) => m.member_id === memberId);
    if (found || listed.data.next_cursor === null) return found;
    cursor = listed.data.next_cursor;
  }
  return undefined;
}

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

async function membersPage(c: DashContext, project: ProjectItem, notice: Notice = {}) {
  const pid = project.project_id;
  const manage = canManageMembers(c);
  const members: ApiResult<Page<Member>> = await c.get("api")("GET", `/projects/${seg(pid)}/members?limit=100`);
  const invites: ApiResult<Page<Invite>> | null = manage
    ? await c.get("api")("GET", `/projects/${seg(pid)}/invites?limit=100`)
    : null;
  const me = c.get("user")?.id;
  const csrf = c.get("csrf");
  const status = notice.problem
    ? notice.problem.status === 409
      ? 409
      : notice.problem.status === 403
        ? 403
        : 400
    : 200;
  return renderPage(
    c,
    { title: "Members", projectId: pid, tab: "members", status },
    <>
      <ProjectHeading project={project} title="Members" />
      <p class="muted">
        People who work on this project, and their role: {ROLES.map((r) => `${r} (${ROLE_HINT[r]})`).join("; ")}.
      </p>
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
        <DataTable
          caption="Members"
          columns={["Name", "Email", "Role", { label: "Member since", optional: true }]}
          actions
        >
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
                  ) : (
                    (manage || self) && (
                      // A page of its own, not a dialog: it lists the API keys that end with the member.
                      <a class="button danger" href={projectPath(pid, `/members/${m.member_id}/remove`)}>
                        {self ? "Leave" : "Remove"}
                        {!self && <span class="skip"> {who}</span>}
                      </a>
                    )
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

function InviteList({
  pid,
  invites,
  csrf,
}: {
  pid: string;
  invites: ApiResult<Page<Invite>> | null;
  csrf: string;
}): Child {
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
      if (!sent.ok)
        return membersPage(c, project, { problem: sent.problem, action: "The invite was not sent", invite });
      return membersPage(c, project, {
        done: `${sent.data.email} is invited as ${sent.data.role}: the invite is theirs when they sign in with that address.`,
      });
    }),
  );

  dash.post("/projects/:project_id/members/invites/:invite_id/withdraw", (c) =>
    withProject(c, async (project) => {
      const id = c.req.param("invite_id");
      const withdrawn = await c.get("api")<Invite>("DELETE", `/projects/${seg(project.project_id)}/invites/${seg(id)}`);
      if (!withdrawn.ok)
        return membersPage(c, project, { problem: withdrawn.problem, action: "The invite was not withdrawn" });
      return membersPage(c, project, { done: `The invite of ${withdrawn.data.email} was withdrawn.` });
    }),
  );

  dash.post("/projects/:project_id/members/:member_id/role", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const memberId = c.req.param("member_id");
      const form = await c.req.parseBody();
      const role = formText(form, "role");
      // Moving someone to a role that may not create tokens ends theirs: say which, and ask first.
      if (
        (ROLES as readonly string[]).includes(role) &&
        endsTokens(role as Role) &&
        formText(form, "confirmed") !== "yes" &&
        ID.test(memberId)
      ) {
        const member = await findMember(c, pid, memberId);
        const ending = member && member.role !== role ? await tokensEndingWith(c, pid, member.user_id) : undefined;
        if (member && ending !== undefined && (ending === null || ending.tokens.length > 0 || ending.more)) {
          const who = member.name ?? member.email ?? member.user_id;
          return renderPage(
            c,
            { title: "Change role", projectId: pid, tab: "members" },
            <div class="card">
              <form method="post" action={projectPath(pid, `/members/${memberId}/role`)}>
                <Csrf token={c.get("csrf")} />
                <input type="hidden" name="role" value={role} />
                <input type="hidden" name="confirmed" value="yes" />
                <h2 id="role-title">
                  Make {who} a {role}?
                </h2>
                <p>A {role} may not create API keys, so the ones they created end.</p>
                <EndingTokens ending={ending} who={who} />
                <div class="actions">
                  <button type="submit" class="danger">
                    Make {role}
                  </button>
                  <a class="button secondary" href={projectPath(pid, "/members")}>
                    Cancel
                  </a>
                </div>
              </form>
            </div>,
          );
        }
      }
      const changed = await c.get("api")<ChangedMember>("PATCH", `/projects/${seg(pid)}/members/${seg(memberId)}`, {
        role,
      });
      if (!changed.ok) return membersPage(c, project, { problem: changed.problem, action: "The role was not changed" });
      return membersPage(c, project, {
        done: `${changed.data.name ?? changed.data.email ?? "The member"} is now ${changed.data.role}.${endedText(changed.data.ended_service_accounts)}`,
      });
    }),
  );

  dash.get("/projects/:project_id/members/:member_id/remove", (c) =>
    withProject(c, async (project) => {
      const pid = project.project_id;
      const id = c.req.param("member_id");
      const member = ID.test(id) ? await findMember(c, pid, id) : undefined;
      const self = member !== undefined && member.user_id === c.get("user")?.id;
      const who = member ? (self ? "you" : (member.name ?? member.email ?? member.user_id)) : "this member";
      const ending = member ? await tokensEndingWith(c, pid, member.user_id) : null;
      return renderPage(
        c,
        { title: self ? "Leave project" : "Remove member", projectId: pid, tab: "members", status: member ? 200 : 404 },
        <div class="card">
          {member ? (
            <ConfirmForm
              id="remove"
              action={projectPath(pid, `/members/${id}/remove`)}
              csrf={c.get("csrf")}
              title={self ? "Leave this project?" : `Remove ${who}?`}
              question={
                <>
                  {self ? "You lose access to this project at once." : "They lose access to this project at once."}
                  <EndingTokens ending={ending} who={who} />
                </>
              }
              confirmLabel={self ? "Leave project" : "Remove member"}
              cancelHref={projectPath(pid, "/members")}
            />
          ) : (
            <p>
              There is no such member. <a href={projectPath(pid, "/members")}>Back to Members</a>
            </p>
          )}
        </div>,
      );
    }),
  );

  dash.post("/projects/:project_id/members/:member_id/remove", (c) =>
    withProject(c, async (project) => {
      const removed = await c.get("api")<ChangedMember>(
        "DELETE",
        `/projects/${seg(project.project_id)}/members/${seg(c.req.param("member_id"))}`,
      );
      if (!removed.ok)
        return membersPage(c, project, { problem: removed.problem, action: "The member was not removed" });
      // Whoever left no longer sees the project.
      if (removed.data.user_id === c.get("user")?.id) return c.redirect(dashPath("/projects"), 303);
      return membersPage(c, project, {
        done: `${removed.data.name ?? removed.data.email ?? "The member"} was removed.${endedText(removed.data.ended_service_accounts)}`,
      });
    }),
  );
}
