/**
 * The dashboard's only stylesheet and script, served by the Worker itself (no CDN, no inline code, so
 * the Content-Security-Policy can say `'self'` and nothing else). The script only enhances: every page
 * works without it (confirmations fall back to confirmation pages, copying to selecting the text).
 */
export const SCRIPT = `"use strict";
(function () {
  var live = document.getElementById("live");
  function announce(text) { if (live) { live.textContent = ""; setTimeout(function () { live.textContent = text; }, 50); } }
  document.querySelectorAll("[data-copy]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy"));
      if (!source) return;
      var text = "value" in source ? source.value : source.textContent;
      var done = function () { button.classList.add("copied"); announce("Copied to the clipboard"); setTimeout(function () { button.classList.remove("copied"); }, 2000); };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, function () { if (source.select) source.select(); announce("Press Ctrl+C to copy"); });
      } else if (source.select) { source.select(); announce("Press Ctrl+C to copy"); }
    });
  });
  document.querySelectorAll("a[data-dialog]").forEach(function (opener) {
    var dialog = document.getElementById(opener.getAttribute("data-dialog"));
    if (!dialog || typeof dialog.showModal !== "function") return;
    opener.setAttribute("aria-haspopup", "dialog");
    opener.addEventListener("click", function (event) { event.preventDefault(); dialog.showModal(); });
    dialog.addEventListener("close", function () { opener.focus(); });
    dialog.querySelectorAll("[data-close]").forEach(function (button) {
      button.addEventListener("click", function () { dialog.close(); });
    });
  });
  // A page that follows runs (data-live: the project's runs as server-sent events): on each event the page
  // is fetched again and its live parts (data-live-part) replaced, at most one fetch at a time; a page
  // without data-live any more (a run that ended) is final, and the stream is closed.
  var status = document.querySelector("[data-live]");
  if (status && window.EventSource && window.fetch && window.DOMParser) {
    var source = null, busy = false, again = false, opened = false, failures = 0;
    var say = function (text) { status.lastChild.textContent = " " + text; };
    var refresh = function () {
      if (busy) { again = true; return; }
      busy = true;
      fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) { return response.ok || response.status === 404 ? response.text() : null; })
        .then(function (html) {
          if (html === null) return;
          var fresh = new DOMParser().parseFromString(html, "text/html");
          document.querySelectorAll("[data-live-part]").forEach(function (part) {
            var next = fresh.getElementById(part.id);
            if (next && next.innerHTML !== part.innerHTML) part.innerHTML = next.innerHTML;
          });
          if (!fresh.querySelector("[data-live]")) {
            if (source) source.close();
            source = null;
            status.classList.add("ended");
            say("Ended: this page is final.");
            announce("The run has ended");
          }
        })
        .catch(function () {})
        .then(function () { busy = false; if (again && source) { again = false; refresh(); } });
    };
    var connect = function () {
      source = new EventSource(status.getAttribute("data-live"));
      source.addEventListener("runs", refresh);
      // What changed between the page and the stream (or while reconnecting) is fetched once.
      source.addEventListener("open", function () {
        failures = 0;
        if (opened || document.querySelector("[data-under-way]") || status.hasAttribute("data-follow")) refresh();
        opened = true;
      });
      source.addEventListener("error", function () {
        if (source && source.readyState === EventSource.CLOSED) {
          source = null;
          if (++failures <= 3) setTimeout(connect, 5000 * failures);
        }
      });
    };
    status.hidden = false;
    connect();
  }
  // A receiver's page following a task (#task-card[data-running]): its card is asked for again (one API
  // call: …/tasks/{task_id}) every second while it changes, less often while it does not (up to 5 s, none
  // while the tab is hidden), and replaced; once the task is over, the page's parts that it changed
  // (data-poll-part: state, figures, held and failed deliveries) are fetched once more. Without script: Refresh.
  var card = document.querySelector("#task-card[data-running]");
  if (card && window.fetch && window.DOMParser) {
    var taskUrl = location.pathname.replace(/\\/$/, "") + "/tasks/" + encodeURIComponent(card.getAttribute("data-task")) + location.search;
    var wait = 1000, last = null;
    var later = function () { setTimeout(ask, wait); };
    var settle = function () {
      fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) { return response.ok ? response.text() : null; })
        .then(function (html) {
          if (html === null) return;
          var fresh = new DOMParser().parseFromString(html, "text/html");
          document.querySelectorAll("[data-poll-part]").forEach(function (part) {
            var next = fresh.getElementById(part.id);
            if (next && next.innerHTML !== part.innerHTML) part.innerHTML = next.innerHTML;
          });
        })
        .catch(function () {});
    };
    var ask = function () {
      if (document.hidden) return later();
      fetch(taskUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (answer) {
          if (!answer || typeof answer.html !== "string") { wait = Math.min(wait * 2, 5000); return later(); }
          var now = document.getElementById("task-card");
          var changed = answer.html !== last;
          last = answer.html;
          if (changed && now) now.outerHTML = answer.html;
          if (!answer.running) {
            var summary = document.getElementById("task-summary");
            announce(summary ? summary.textContent : "The task is over");
            return settle();
          }
          wait = changed ? 1000 : Math.min(wait * 1.5, 5000);
          later();
        })
        .catch(function () { wait = Math.min(wait * 2, 5000); later(); });
    };
    later();
  }
  // A table or a command wider than its box scrolls inside it: the box takes the keyboard's focus (arrow
  // keys scroll it); a table's is a region named by its caption.
  document.querySelectorAll(".table-wrap, pre").forEach(function (box) {
    if (box.scrollWidth <= box.clientWidth) return;
    box.setAttribute("tabindex", "0");
    var caption = box.querySelector("caption");
    if (!caption) return;
    box.setAttribute("role", "region");
    box.setAttribute("aria-label", caption.textContent);
  });
  // The project's tabs scroll sideways on a phone: the current one is brought into view.
  var current = document.querySelector('nav.tabs a[aria-current="page"]');
  if (current && current.scrollIntoView) current.scrollIntoView({ block: "nearest", inline: "center" });
})();
`;

export const STYLES = `
:root { color-scheme: light dark; --fg:#111827; --muted:#4b5563; --bg:#ffffff; --panel:#f9fafb; --line:#d1d5db; --field-line:#6b7280; --accent:#1d4ed8; --accent-fg:#ffffff;
  --danger:#b91c1c; --danger-fg:#ffffff; --ok:#166534; --ok-bg:#dcfce7; --warn:#92400e; --warn-bg:#fef3c7; --bad-bg:#fee2e2; --info-bg:#dbeafe; --hover:rgba(17, 24, 39, .06);
  --c2xx:#2563eb; --c4xx:#d97706; --c5xx:#b91c1c; --cgw:#6b7280; --p50:#2563eb; --p95:#7c3aed; --p99:#be185d; --backdrop:rgba(17, 24, 39, .5);
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
/* The same page for people whose system is dark: every colour is one of these, so nothing stays light. */
@media (prefers-color-scheme: dark) {
  :root { --fg:#e5e7eb; --muted:#9ca3af; --bg:#111827; --panel:#1f2937; --line:#374151; --field-line:#6b7280; --accent:#93c5fd; --accent-fg:#111827;
    --danger:#f87171; --danger-fg:#111827; --ok:#86efac; --ok-bg:#14532d; --warn:#fcd34d; --warn-bg:#451a03; --bad-bg:#450a0a; --info-bg:#1e3a8a; --hover:rgba(255, 255, 255, .08);
    --c2xx:#60a5fa; --c4xx:#fbbf24; --c5xx:#f87171; --cgw:#9ca3af; --p50:#60a5fa; --p95:#c4b5fd; --p99:#f9a8d4; --backdrop:rgba(0, 0, 0, .6); }
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; line-height: 1.5; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid #f59e0b; outline-offset: 2px; }
.skip { position: absolute; left: -9999px; }
.skip:focus { left: 1rem; top: 1rem; background: var(--bg); padding: .5rem; z-index: 10; }
header.top { display: flex; flex-wrap: wrap; gap: .75rem 1.5rem; align-items: center; padding: .75rem 1rem; border-bottom: 1px solid var(--line); background: var(--panel); }
header.top .brand { font-weight: 700; color: var(--fg); text-decoration: none; display: inline-flex; align-items: center; gap: .5rem; }
header.top .brand img { display: block; }
header.top form { margin: 0; display: flex; gap: .5rem; align-items: center; }
header.top .spacer { flex: 1; }
nav.tabs ul { list-style: none; display: flex; flex-wrap: wrap; gap: .25rem; margin: 0; padding: 0 1rem; border-bottom: 1px solid var(--line); }
nav.tabs a { display: block; padding: .6rem .8rem; text-decoration: none; color: var(--muted); border-bottom: 3px solid transparent; }
nav.tabs a[aria-current="page"] { color: var(--fg); border-bottom-color: var(--accent); font-weight: 600; }
main { max-width: 72rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.5rem; margin: .5rem 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
.muted { color: var(--muted); }
.card { border: 1px solid var(--line); border-radius: .5rem; padding: 1rem; background: var(--bg); margin: 1rem 0; }
form.stack { display: grid; gap: .75rem; max-width: 32rem; }
label { font-weight: 600; display: block; }
.hint { color: var(--muted); font-size: .9rem; margin: 0; }
.field-error { color: var(--danger); font-size: .9rem; margin: 0; }
input, select { font: inherit; padding: .45rem .6rem; border: 1px solid var(--field-line); border-radius: .375rem; width: 100%; max-width: 32rem; background: var(--bg); color: var(--fg); }
input[aria-invalid="true"] { border-color: var(--danger); }
fieldset { border: 1px solid var(--line); border-radius: .375rem; padding: .5rem .75rem; margin: 0; }
legend { font-weight: 600; padding: 0 .25rem; }
label.check { font-weight: normal; padding: .2rem 0; }
label.check input { width: auto; margin-right: .35rem; }
ul.scopes { list-style: none; padding: 0; margin: 0; }
button, .button { font: inherit; display: inline-block; padding: .45rem .9rem; border-radius: .375rem; border: 1px solid var(--accent); background: var(--accent); color: var(--accent-fg); cursor: pointer; text-decoration: none; }
button.secondary, .button.secondary { background: var(--bg); color: var(--accent); }
button.danger, .button.danger { background: var(--danger); border-color: var(--danger); color: var(--danger-fg); }
header.top button { padding: .3rem .7rem; }
header.top select { width: auto; max-width: 14rem; padding: .3rem .5rem; }
.alert { border-radius: .5rem; padding: .75rem 1rem; margin: 1rem 0; border: 1px solid; }
.alert.error { background: var(--bad-bg); border-color: var(--danger); }
.alert.warning { background: var(--warn-bg); border-color: var(--warn); }
.alert.success { background: var(--ok-bg); border-color: var(--ok); }
.alert p { margin: .25rem 0; }
.card > h2:first-child, .alert > h2:first-child, dialog h2 { margin-top: 0; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .5rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .85rem; color: var(--muted); text-transform: uppercase; letter-spacing: .03em; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9em; overflow-wrap: anywhere; }
.badge { display: inline-block; padding: .05rem .5rem; border-radius: 999px; font-size: .8rem; font-weight: 600; border: 1px solid; }
.badge.ok { background: var(--ok-bg); color: var(--ok); }
.badge.warn { background: var(--warn-bg); color: var(--warn); }
.badge.bad { background: var(--bad-bg); color: var(--danger); }
.badge.info { background: var(--info-bg); color: var(--accent); }
.badge.neutral { background: var(--panel); color: var(--muted); }
button.copied { background: var(--ok); border-color: var(--ok); }
.copy-row { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
.copy-row input { flex: 1; min-width: 12rem; }
dialog { border: 1px solid var(--line); border-radius: .5rem; padding: 1.25rem; background: var(--bg); color: var(--fg); max-width: min(32rem, calc(100vw - 2rem)); }
dialog::backdrop { background: var(--backdrop); }
.actions { display: flex; gap: .5rem; flex-wrap: wrap; margin-top: 1rem; }
.signin { max-width: 26rem; margin: 10vh auto; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1rem; margin: .5rem 0; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.row-actions { display: flex; gap: .5rem; flex-wrap: wrap; }
form.inline { display: inline; margin: 0; }
form.below { margin: .5rem 0 0; }
ol.timeline { list-style: none; margin: .5rem 0; padding: 0 0 0 1rem; border-left: 3px solid var(--line); display: grid; gap: .6rem; }
ol.timeline li { position: relative; }
ol.timeline li::before { content: ""; position: absolute; left: -1.45rem; top: .45rem; width: .7rem; height: .7rem; border-radius: 50%; background: var(--accent); }
svg.timeline-bar { display: block; width: 100%; max-width: 40rem; height: auto; margin: .25rem 0 .75rem; }
svg.timeline-bar .stretch { stroke: var(--bg); stroke-width: 1; }
svg.timeline-bar .s0 { fill: var(--p50); }
svg.timeline-bar .s1 { fill: var(--p95); }
svg.timeline-bar .s2 { fill: var(--p99); }
.whose { font-size: .85rem; color: var(--muted); }
.whose.gateway { color: var(--danger); }
.caller { border-bottom: 1px dotted var(--muted); }
form.filter { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: flex-end; margin: 1rem 0; }
form.filter > div:first-child { flex: 0 1 32rem; min-width: 14rem; }
form.filter .actions { margin-top: 0; }
ol.attempts { margin: 0; padding-left: 0; list-style: none; }
table.record .copy-row input { min-width: 8rem; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: .375rem; padding: .75rem; overflow-x: auto; margin: .5rem 0 0; }
pre code { overflow-wrap: normal; white-space: pre; }
ul.plain { list-style: none; padding: 0; margin: 0; display: grid; gap: .35rem; }
td.nowrap { white-space: nowrap; }
code.id { font-size: .8em; white-space: nowrap; overflow-wrap: normal; }
code.clip { display: inline-block; max-width: 7rem; overflow: hidden; text-overflow: ellipsis; vertical-align: bottom; }
figure.chart text.empty { font-size: 13px; }
td.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
nav.segmented { display: inline-flex; border: 1px solid var(--line); border-radius: .375rem; overflow: hidden; margin: 0 0 1rem; }
nav.segmented a { padding: .35rem .8rem; text-decoration: none; border-left: 1px solid var(--line); }
nav.segmented a:first-child { border-left: 0; }
nav.segmented a[aria-current="page"] { background: var(--accent); color: var(--accent-fg); font-weight: 600; }
dl.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(6.75rem, 1fr)); gap: .6rem; margin: 0 0 1rem; }
dl.stats .stat { border: 1px solid var(--line); border-radius: .5rem; padding: .6rem .8rem; }
dl.stats dt { font-size: .85rem; color: var(--muted); }
dl.stats dd { margin: 0; font-size: 1.25rem; white-space: nowrap; font-weight: 600; font-variant-numeric: tabular-nums; }
dl.stats dd .muted { display: block; font-size: .8rem; font-weight: normal; white-space: normal; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 26rem), 1fr)); gap: 1rem; }
figure.chart { margin: 0; border: 1px solid var(--line); border-radius: .5rem; padding: .75rem 1rem; min-width: 0; }
figure.chart figcaption { font-weight: 600; }
figure.chart svg { display: block; width: 100%; height: auto; }
figure.chart text { font-size: 11px; fill: var(--muted); font-variant-numeric: tabular-nums; }
figure.chart .grid line { stroke: var(--line); stroke-width: 1; }
figure.chart .line path { fill: none; stroke: var(--c); stroke-width: 1.5; stroke-linejoin: round; stroke-linecap: round; }
figure.chart .line .mark { fill: var(--bg); stroke: var(--c); stroke-width: 2; }
figure.chart .tone-p50 .mark { fill: var(--c); stroke: none; }
figure.chart .tone-p95 path { stroke-width: 2.5; stroke-dasharray: 6 3; }
figure.chart .tone-p99 path { stroke-width: 5; stroke-opacity: .45; }
figure.chart .hit { fill: transparent; }
figure.chart .bars g:hover .hit, figure.chart .hits .hit:hover { fill: var(--hover); }
figure.chart details { margin-top: .5rem; font-size: .9rem; }
figure.chart table.figures { font-variant-numeric: tabular-nums; }
figure.chart table.figures th, figure.chart table.figures td { padding: .2rem .5rem; }
ul.legend { list-style: none; display: flex; flex-wrap: wrap; gap: .25rem 1rem; padding: 0; margin: .25rem 0; font-size: .875rem; }
.swatch { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px; margin-right: .35rem; vertical-align: -1px; background: var(--c); }
.swatch.tone-p50, .swatch.tone-p95, .swatch.tone-p99 { height: 0; width: 1.2rem; border-radius: 0; background: none; border-top: 3px solid var(--c); vertical-align: middle; }
.swatch.tone-p50 { border-top-width: 2px; }
.swatch.tone-p95 { border-top-style: dashed; }
.swatch.tone-p99 { border-top-width: 6px; border-top-color: color-mix(in srgb, var(--c) 45%, transparent); }
.tone-c2xx { --c: var(--c2xx); fill: var(--c); }
.tone-c4xx { --c: var(--c4xx); fill: var(--c); }
.tone-c5xx { --c: var(--c5xx); fill: var(--c); }
.tone-cgw { --c: var(--cgw); fill: var(--c); }
.tone-p50 { --c: var(--p50); }
.tone-p95 { --c: var(--p95); }
.tone-p99 { --c: var(--p99); }
div.last-day { display: flex; align-items: center; gap: .6rem; white-space: nowrap; }
svg.spark { flex: none; width: 6rem; height: 1.75rem; }
svg.spark .base { stroke: var(--line); }
svg.share { display: block; width: 6rem; height: .5rem; margin-top: .35rem; border-radius: 2px; }
form.filter.runs > div:first-child { flex: 0 1 14rem; min-width: 10rem; }
form.filter.runs select { width: auto; min-width: 10rem; }
.nowrap { white-space: nowrap; }
/* In a table an id or a URL keeps its letters together (it never squeezes its column to one letter's
   width): the table grows, and scrolls inside its box. */
td code { overflow-wrap: break-word; }
p.live { display: flex; align-items: center; gap: .4rem; font-size: .9rem; margin: 0 0 .5rem; }
p.live .dot { width: .55rem; height: .55rem; border-radius: 50%; background: var(--ok); flex: none; }
p.live.ended .dot { background: var(--muted); }
.card.under-way li { overflow-wrap: anywhere; }
figure.timeline-bar { margin: 0 0 .75rem; }
figure.timeline-bar svg { margin-bottom: .25rem; }
.swatch.stretch-s0 { --c: var(--p50); }
.swatch.stretch-s1 { --c: var(--p95); }
.swatch.stretch-s2 { --c: var(--p99); }
.not-found code { overflow-wrap: anywhere; }
.card progress { display: block; width: 100%; max-width: 32rem; height: 1rem; margin: .5rem 0; accent-color: var(--accent); }
@media (max-width: 40rem) {
  /* A compact header: the brand (which leads to every project), the switcher, sign-out; the tabs one
     line that scrolls sideways inside itself. */
  header.top { gap: .4rem .6rem; padding: .5rem .75rem; }
  header.top .who, header.top .all-projects { display: none; }
  header.top .brand-name { position: absolute; left: -9999px; }
  header.top select { max-width: 8rem; }
  nav.tabs ul { flex-wrap: nowrap; overflow-x: auto; padding: 0 .5rem; scrollbar-width: thin; }
  nav.tabs a { white-space: nowrap; padding: .5rem .6rem; }
  main { padding: .75rem; }
  h1 { font-size: 1.3rem; margin: .25rem 0 .75rem; }
  th.optional, td.optional { display: none; }
  header.top .spacer { display: none; }
  dl.facts { grid-template-columns: 1fr; }
  dl.facts dd { margin-bottom: .4rem; }
  table.cards thead { display: none; }
  table.cards tr, table.cards td { display: block; }
  table.cards tr { border-bottom: 1px solid var(--line); padding: .5rem 0; }
  table.cards td { border: 0; padding: .25rem 0; }
  figure.chart text { font-size: 14px; }
  table.cards td[data-label]::before { content: attr(data-label); display: block; font-size: .85rem; color: var(--muted); text-transform: uppercase; letter-spacing: .03em; }
}
/* After the cards' rules, so that these win on the Runs list. */
@media (max-width: 40rem) {
  /* A run as two or three lines: its time and id beside its duration; its outcome beside its app and
     request; its webhook when there is one. */
  table.runs tr { display: grid; grid-template-columns: auto minmax(0, 1fr) auto; gap: .15rem .6rem; padding: .45rem 0; }
  table.runs td { padding: 0; min-width: 0; }
  table.runs td.optional { display: none; }
  table.runs td[data-label]::before { content: none; }
  table.runs td.run { grid-column: 1 / 3; grid-row: 1; font-size: .85rem; }
  table.runs td.duration { grid-column: 3; grid-row: 1; text-align: right; font-size: .85rem; }
  table.runs td.duration br, table.runs td.duration .muted { display: none; }
  table.runs td.outcome { grid-column: 1; grid-row: 2; }
  table.runs td.request { grid-column: 2 / -1; grid-row: 2; font-size: .9rem; }
  table.runs td.webhook { grid-column: 1 / -1; }
  table.runs td.outcome br { display: none; }
  table.runs td.outcome .whose, table.runs td.outcome .muted { display: block; font-size: .8rem; }
  table.runs td.request br { display: none; }
  table.runs td.request code { overflow-wrap: anywhere; margin-left: .3rem; }
  table.runs td.webhook.none { display: none; }
}
`;

export const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1d4ed8"/><path d="M9 9h14v3H13v3h8v3h-8v3h10v3H9z" fill="#fff"/></svg>`;
