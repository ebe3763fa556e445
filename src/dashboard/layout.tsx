import { raw } from "hono/html";
import type { Child } from "hono/jsx";
import type { Page } from "./api";
import type { ProjectItem } from "./api-types";
import { Csrf, ProblemMessage, when } from "./components";
import { type DashContext, dashPath, filteredDeliveries, projectPath, receiverPage } from "./context";
import { PROJECT_NAV } from "./nav";

/**
 * A banner for each receiver of the project that is disabled or paused (its new deliveries are held),
 * or whose deliveries fail (its last settled one failed): what to do about it, one link away.
 */
function StoppedReceivers({ c, projectId }: { c: DashContext; projectId: string }) {
  const stopped = c.get("stoppedReceivers") ?? [];
  if (stopped.length === 0) return null;
  // The receiver's own page (pages/receiver.tsx): its controls, the recovery and its failed deliveries.
  const page = (origin: string) => receiverPage(projectId, origin);
  return (
    <>
      {stopped.map((r) =>
        r.state === "active" ? (
          <div class="alert error" role="alert">
            Webhook receiver <code>{r.origin}</code> is failing: its deliveries have failed since{" "}
            {when(r.failingSince!.toISOString())}. Once it answers again, <a href={page(r.origin)}>recover</a> its{" "}
            <a href={filteredDeliveries(projectId, r.origin, "failed")}>failed deliveries</a>.
          </div>
        ) : (
          <div class={r.state === "disabled" ? "alert error" : "alert warning"} role="alert">
            Webhook receiver <code>{r.origin}</code> is {r.state}
            {r.cause && r.cause !== r.state ? `: ${r.cause}` : ""}. Its new deliveries are held until you{" "}
            <a href={page(r.origin)}>resume it</a>.
          </div>
        ),
      )}
    </>
  );
}

export interface PageOptions {
  title: string;
  /** The project the page belongs to: shows the project's tabs and selects it in the switcher. */
  projectId?: string;
  /** Which tab is current (a slug of PROJECT_NAV). */
  tab?: string;
  status?: 200 | 201 | 400 | 403 | 404 | 409 | 429 | 500;
}

function Document({ title, children, refreshTo }: { title: string; children: Child; refreshTo?: string | undefined }) {
  // Without the doctype browsers render in quirks mode (other box sizes, table font inheritance).
  return (
    <>
      {raw("<!DOCTYPE html>")}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <title>{`${title} · Edge Gateway`}</title>
          {refreshTo && <meta http-equiv="refresh" content={`0;url=${refreshTo}`} />}
          <link rel="icon" href={dashPath("/assets/icon.svg")} type="image/svg+xml" />
          <link rel="stylesheet" href={dashPath("/assets/dashboard.css")} />
          <script src={dashPath("/assets/dashboard.js")} defer></script>
        </head>
        <body>
          {children}
          <div id="live" class="skip" aria-live="polite"></div>
        </body>
      </html>
    </>
  );
}

/** Who the session is: the person (name and email) or the operator. */
function signedInAs(c: DashContext): string {
  const user = c.get("user");
  if (!user) return "Operator";
  return user.name && user.email ? `${user.name} (${user.email})` : (user.email ?? user.name ?? "Signed in");
}

/** A page of the signed-in dashboard: header with the project switcher and sign-out, the project's tabs, content. */
export async function renderPage(c: DashContext, options: PageOptions, content: Child) {
  const projects = await c.get("api")<Page<ProjectItem>>("GET", "/projects?limit=100");
  // The switcher shows names; a project not in the first page is listed by its id.
  const list: Pick<ProjectItem, "project_id" | "name">[] = projects.ok ? projects.data.data : [];
  const current = options.projectId;
  if (current && !list.some((p) => p.project_id === current)) list.push({ project_id: current, name: current });
  const csrf = c.get("csrf");
  c.status(options.status ?? 200);
  return c.html(
    <Document title={options.title}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={dashPath("/projects")}>
          <img src={dashPath("/assets/icon.svg")} alt="" width="24" height="24" />
          <span class="brand-name">Edge Gateway</span>
        </a>
        <form method="get" action={dashPath("/switch")} aria-label="Project switcher">
          <label for="project-switcher" class="skip">
            Project
          </label>
          <select id="project-switcher" name="project">
            {!current && <option value="">Choose a project…</option>}
            {list.map((p) => (
              <option value={p.project_id} selected={p.project_id === current}>
                {p.name}
              </option>
            ))}
          </select>
          {options.tab && <input type="hidden" name="tab" value={options.tab} />}
          <button type="submit" class="secondary">
            Switch
          </button>
        </form>
        <span class="spacer"></span>
        <span class="muted who">{signedInAs(c)}</span>
        <a class="all-projects" href={dashPath("/projects")}>
          All projects
        </a>
        <form method="post" action={dashPath("/sign-out")}>
          <Csrf token={csrf} />
          <button type="submit" class="secondary">
            Sign out
          </button>
        </form>
      </header>
      {current && (
        <nav class="tabs" aria-label="Project">
          <ul>
            {PROJECT_NAV.map((item) => (
              <li>
                <a
                  href={projectPath(current, `/${item.slug}`)}
                  aria-current={item.slug === options.tab ? "page" : undefined}
                >
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      )}
      <main id="main" tabindex={-1}>
        {!projects.ok && <ProblemMessage problem={projects.problem} action="Loading projects" />}
        {current && <StoppedReceivers c={c} projectId={current} />}
        {content}
      </main>
    </Document>,
  );
}

/**
 * A page outside the signed-in frame (sign-in, errors before sign-in). `refreshTo` moves on to that
 * page of ours at once, as a navigation of this page rather than a redirect.
 */
export function renderBare(
  c: DashContext,
  title: string,
  content: Child,
  status: 200 | 400 | 403 | 404 | 429 | 500 | 502 = 200,
  refreshTo?: string,
) {
  c.status(status);
  return c.html(
    <Document title={title} refreshTo={refreshTo}>
      <main id="main" class="signin">
        {content}
      </main>
    </Document>,
  );
}
