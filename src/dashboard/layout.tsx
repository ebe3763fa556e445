import type { Child } from "hono/jsx";
import type { Page, Problem } from "./api";
import { type DashContext, dashPath, projectPath } from "./context";
import { PROJECT_NAV } from "./nav";

interface ProjectSummary {
  project_id: string;
  name: string;
}

/** The hidden CSRF field every form carries. */
export const Csrf = ({ token }: { token: string }) => <input type="hidden" name="_csrf" value={token} />;

/** An API problem as a sentence a person can act on; never the raw JSON. */
export function ProblemMessage({ problem, action }: { problem: Problem; action?: string }) {
  const fields = Object.entries(problem.fields);
  return (
    <div class="alert error" role="alert">
      <p>
        <strong>{action ? `${action}: ${problem.title}` : problem.title}.</strong> {problem.detail}
      </p>
      {fields.length > 0 && (
        <ul>
          {fields.map(([field, message]) => (
            <li>
              <code>{field}</code> {message}
            </li>
          ))}
        </ul>
      )}
      {problem.requestId && <p class="muted">Request id: <code>{problem.requestId}</code></p>}
    </div>
  );
}

export function Field(props: {
  label: string;
  name: string;
  value?: string;
  type?: string;
  hint?: string;
  error?: string | undefined;
  required?: boolean;
  min?: string;
  max?: string;
  maxlength?: number;
  autocomplete?: string;
  children?: Child;
}) {
  const id = `field-${props.name}`;
  const describedBy = [props.hint ? `${id}-hint` : "", props.error ? `${id}-error` : ""].filter(Boolean).join(" ");
  return (
    <div>
      <label for={id}>{props.label}</label>
      {props.hint && <p class="hint" id={`${id}-hint`}>{props.hint}</p>}
      {props.children ?? (
        <input
          id={id}
          name={props.name}
          type={props.type ?? "text"}
          value={props.value ?? ""}
          required={props.required}
          min={props.min}
          max={props.max}
          maxlength={props.maxlength}
          autocomplete={props.autocomplete ?? "off"}
          aria-describedby={describedBy || undefined}
          aria-invalid={props.error ? "true" : undefined}
        />
      )}
      {props.error && <p class="field-error" id={`${id}-error`}>{props.error}</p>}
    </div>
  );
}

/**
 * A destructive action behind a confirmation: without script the link opens a confirmation page; with
 * it, the same form opens in a modal dialog (keyboard: focus moves in, Esc closes, focus returns).
 */
export function ConfirmAction(props: {
  id: string;
  label: string;
  href: string;
  action: string;
  csrf: string;
  title: string;
  question: Child;
  confirmLabel: string;
}) {
  return (
    <>
      <a class="button danger" href={props.href} data-dialog={props.id}>
        {props.label}
      </a>
      <dialog id={props.id} aria-labelledby={`${props.id}-title`}>
        <ConfirmForm {...props} />
      </dialog>
    </>
  );
}

export function ConfirmForm(props: { id: string; action: string; csrf: string; title: string; question: Child; confirmLabel: string; cancelHref?: string }) {
  return (
    <form method="post" action={props.action}>
      <Csrf token={props.csrf} />
      <h2 id={`${props.id}-title`}>{props.title}</h2>
      <p>{props.question}</p>
      <div class="actions">
        <button type="submit" class="danger">
          {props.confirmLabel}
        </button>
        {props.cancelHref ? (
          <a class="button secondary" href={props.cancelHref}>
            Cancel
          </a>
        ) : (
          <button type="button" class="secondary" data-close>
            Keep it
          </button>
        )}
      </div>
    </form>
  );
}

export const when = (iso: string | null | undefined) =>
  iso ? <time datetime={iso}>{iso.replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC")}</time> : <span class="muted">never</span>;

export interface PageOptions {
  title: string;
  /** The project the page belongs to: shows the project's tabs and selects it in the switcher. */
  projectId?: string;
  /** Which tab is current (a slug of PROJECT_NAV). */
  tab?: string;
  status?: 200 | 201 | 400 | 403 | 404 | 409 | 429 | 500;
}

function Document({ title, children }: { title: string; children: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${title} · Edge Gateway`}</title>
        <link rel="icon" href={dashPath("/assets/icon.svg")} type="image/svg+xml" />
        <link rel="stylesheet" href={dashPath("/assets/dashboard.css")} />
        <script src={dashPath("/assets/dashboard.js")} defer></script>
      </head>
      <body>
        {children}
        <div id="live" class="skip" aria-live="polite"></div>
      </body>
    </html>
  );
}

/** A page of the signed-in dashboard: header with the project switcher and sign-out, the project's tabs, content. */
export async function renderPage(c: DashContext, options: PageOptions, content: Child) {
  const projects = await c.get("api")<Page<ProjectSummary>>("GET", "/projects?limit=100");
  const list = projects.ok ? projects.data.data : [];
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
          Edge Gateway
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
        <a href={dashPath("/projects")}>All projects</a>
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
                <a href={projectPath(current, `/${item.slug}`)} aria-current={item.slug === options.tab ? "page" : undefined}>
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      )}
      <main id="main" tabindex={-1}>
        {!projects.ok && <ProblemMessage problem={projects.problem} action="Loading projects" />}
        {content}
      </main>
    </Document>,
  );
}

/** A page outside the signed-in frame (sign-in, errors before sign-in). */
export function renderBare(c: DashContext, title: string, content: Child, status: 200 | 400 | 403 | 404 | 429 | 500 = 200) {
  c.status(status);
  return c.html(
    <Document title={title}>
      <main id="main" class="signin">
        {content}
      </main>
    </Document>,
  );
}
