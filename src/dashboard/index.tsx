import { bodyLimit } from "hono/body-limit";
import { ApiError, PROBLEMS } from "../platform/errors";
import type { ApiFetch } from "./api";
import { ICON, SCRIPT, STYLES } from "./assets";
import { loadSession, registerAuth, requireSignIn, verifyCsrf } from "./auth";
import { createDashRouter, type DashContext, dashPath } from "./context";
import { renderBare } from "./layout";
import { PAGES } from "./pages";
import { securityHeaders } from "./security";
import { registerOidcSignIn } from "./sign-in-oidc";
import { describeError, log } from "../platform/log";
import { routeOf } from "../platform/scope";

export { DASHBOARD_BASE } from "./context";

/** Dashboard forms are a few short fields. */
const FORM_LIMIT_BYTES = 16 * 1024;

const ASSETS: Record<string, { type: string; body: string }> = {
  "dashboard.js": { type: "text/javascript; charset=utf-8", body: SCRIPT },
  "dashboard.css": { type: "text/css; charset=utf-8", body: STYLES },
  "icon.svg": { type: "image/svg+xml", body: ICON },
};

function errorPage(c: DashContext, title: string, detail: string, status: 400 | 403 | 500) {
  return renderBare(
    c,
    title,
    <div class="alert error" role="alert">
      <h1>{title}</h1>
      <p>{detail}</p>
      <p class="muted">
        Request id: <code>{c.var.scope.requestId}</code>
      </p>
      <p>
        <a href={dashPath("/")}>Back to the dashboard</a>
      </p>
    </div>,
    status,
  );
}

/**
 * The operator's dashboard, mounted at `/dashboard` on the API hostnames. Its pages act through the
 * management API (`apiFetch`, the Worker's own fetch) with the admin token the session stands for.
 */
export function createDashboard(apiFetch: ApiFetch) {
  const dash = createDashRouter();
  dash.use(securityHeaders);
  dash.get("/assets/:file", (c) => {
    const asset = ASSETS[c.req.param("file")];
    if (!asset) return c.text("Not found", 404);
    return c.body(asset.body, 200, { "Content-Type": asset.type, "Cache-Control": "public, max-age=300" });
  });
  dash.use(
    bodyLimit({
      maxSize: FORM_LIMIT_BYTES,
      onError: (c) => errorPage(c, "Form too large", `Dashboard forms are limited to ${FORM_LIMIT_BYTES} bytes.`, 400),
    }),
  );
  dash.use(loadSession);
  dash.use(verifyCsrf);
  registerAuth(dash);
  registerOidcSignIn(dash);
  dash.use(requireSignIn(apiFetch));
  for (const register of PAGES) register(dash);
  dash.all("*", (c) =>
    renderBare(
      c,
      "Page not found",
      <div class="alert error not-found" role="alert">
        <h1>Page not found</h1>
        <p>
          There is no dashboard page at <code>{c.req.path}</code>.
        </p>
        <p>
          <a href={dashPath("/projects")}>See all projects</a>
        </p>
      </div>,
      404,
    ),
  );
  dash.onError((err, c) => {
    if (err instanceof ApiError && err.status < 500) return errorPage(c, PROBLEMS[err.code].title, err.message, 400);
    log("error", "dashboard error", {
      request_id: c.var.scope.requestId,
      route: routeOf(c),
      error: describeError(err, { withStack: true }),
    });
    return errorPage(
      c,
      "Something went wrong",
      "An unexpected error occurred. Quote the request id when reporting it.",
      500,
    );
  });
  return dash;
}
