import type { Child } from "hono/jsx";
import type { Problem } from "./api";

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
      {problem.requestId && (
        <p class="muted">
          Request id: <code>{problem.requestId}</code>
        </p>
      )}
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
      {props.hint && (
        <p class="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      )}
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
      {props.error && (
        <p class="field-error" id={`${id}-error`}>
          {props.error}
        </p>
      )}
    </div>
  );
}

/**
 * A link that opens a modal dialog when script runs (focus moves in, Esc closes, focus returns to the
 * link) and otherwise goes to `href`, a page with the same content: every dialog needs that page.
 */
export function DialogLink(props: { dialog: string; href: string; label: Child; class?: string }) {
  return (
    <a class={props.class ?? "button secondary"} href={props.href} data-dialog={props.dialog}>
      {props.label}
    </a>
  );
}

/** A modal dialog titled by its first heading (give the heading the id `${id}-title`). */
export function Dialog(props: { id: string; children: Child }) {
  return (
    <dialog id={props.id} aria-labelledby={`${props.id}-title`}>
      {props.children}
    </dialog>
  );
}

/** A button that closes the dialog it is in (script only; without script there is no dialog). */
export const CloseDialog = ({ label = "Close" }: { label?: string }) => (
  <button type="button" class="secondary" data-close>
    {label}
  </button>
);

/** A destructive action behind a confirmation: a dialog with script, a confirmation page without. */
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
      <DialogLink dialog={props.id} href={props.href} label={props.label} class="button danger" />
      <Dialog id={props.id}>
        <ConfirmForm {...props} />
      </Dialog>
    </>
  );
}

export function ConfirmForm(props: {
  id: string;
  action: string;
  csrf: string;
  title: string;
  question: Child;
  confirmLabel: string;
  cancelHref?: string;
}) {
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
          <CloseDialog label="Keep it" />
        )}
      </div>
    </form>
  );
}

export const when = (iso: string | null | undefined) =>
  iso ? (
    <time datetime={iso}>
      {iso
        .replace("T", " ")
        .replace(/\.\d+Z$/, " UTC")
        .replace(/Z$/, " UTC")}
    </time>
  ) : (
    <span class="muted">never</span>
  );

/**
 * A value to copy (a token, a DNS record's name or value): a read-only field, selectable without
 * script, with a Copy button that script reveals.
 */
export function CopyValue(props: { id: string; value: string; label: string }) {
  return (
    <div class="copy-row">
      <label for={props.id} class="skip">
        {props.label}
      </label>
      <input id={props.id} class="mono" type="text" readonly value={props.value} />
      <button type="button" data-copy={props.id} hidden>
        Copy<span class="skip"> {props.label}</span>
      </button>
    </div>
  );
}

export type BadgeTone = "ok" | "warn" | "bad" | "info" | "neutral";

/** A status in words and colour (the words carry the meaning; colour only repeats it). */
export const Badge = ({ tone, children }: { tone: BadgeTone; children: Child }) => (
  <span class={`badge ${tone}`}>{children}</span>
);

/** The buttons of a list's filter form: apply, and (when a filter is on) go back to the whole list at `path`. */
export function FilterActions({ path, filtered }: { path: string; filtered: boolean }) {
  return (
    <div class="actions">
      <button type="submit">Filter</button>
      {filtered && (
        <a class="button secondary" href={path}>
          Show all
        </a>
      )}
    </div>
  );
}

/** "Next page" of an API list: the API's opaque `next_cursor`, passed back as `?cursor=` with the page's filters (`query`). */
export function Pager({
  path,
  next,
  query,
}: {
  path: string;
  next: string | null;
  query?: Record<string, string> | undefined;
}) {
  if (!next) return null;
  const params = new URLSearchParams(query);
  params.set("cursor", next);
  return (
    <p>
      <a href={`${path}?${params}`}>Next page →</a>
    </p>
  );
}

/** A column of a `DataTable`: its heading, or the heading of one narrow screens may hide. */
export type Column = string | { label: string; optional: true };

/**
 * The dashboard's data table: scrollable wrapper, a caption for screen readers, one header row, and
 * (with `actions`) a last column for the row's buttons, labelled for screen readers only. The rows
 * are the children; `footer` (a `Pager`) goes under the table, inside the wrapper.
 */
export function DataTable(props: {
  caption: Child;
  columns: readonly Column[];
  actions?: boolean;
  class?: string;
  footer?: Child;
  children: Child;
}) {
  return (
    <div class="table-wrap">
      <table class={props.class}>
        <caption class="skip">{props.caption}</caption>
        <thead>
          <tr>
            {props.columns.map((column) =>
              typeof column === "string" ? (
                <th scope="col">{column}</th>
              ) : (
                <th scope="col" class="optional">
                  {column.label}
                </th>
              ),
            )}
            {props.actions && (
              <th scope="col">
                <span class="skip">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
      {props.footer}
    </div>
  );
}
