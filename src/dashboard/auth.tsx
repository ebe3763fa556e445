import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { createMiddleware } from "hono/factory";
import { secretsEqual } from "../platform/crypto";
import { apiClient, type ApiFetch } from "./api";
import { type DashContext, type DashEnv, type DashRouter, dashPath, formText } from "./context";
import { Csrf, Field } from "./components";
import { renderBare } from "./layout";
import {
  csrfToken,
  csrfTokenValid,
  decodeSession,
  encodeSession,
  newSession,
  sameOrigin,
  type Session,
  sessionKey,
} from "./session";
import { endSession, sessionIsLive, storeSession } from "./session-store";
import { userById } from "../auth/users";
import { clearAttempts, clientIp, MAX_ATTEMPTS, countSignInAttempt, WINDOW_MS, waitText } from "./throttle";
import { log } from "../platform/log";

export const isHttps = (c: DashContext) => new URL(c.req.url).protocol === "https:";
// `__Host-` binds the cookie to this exact host over https (no Domain, Path=/); plain http cannot use it.
const cookieName = (c: DashContext) => (isHttps(c) ? "__Host-eg_session" : "eg_session");

export async function writeSession(c: DashContext, session: Session) {
  const https = isHttps(c);
  setCookie(c, cookieName(c), await encodeSession(c.get("sessionKey"), session), {
    httpOnly: true,
    secure: https,
    sameSite: "Strict",
    path: https ? "/" : dashPath(""),
    expires: new Date(session.expiresAt),
  });
  c.set("session", session);
  c.set("csrf", await csrfToken(c.get("sessionKey"), session));
}

/** Loads the session from its cookie, or starts an anonymous one (it carries the sign-in form's CSRF token). */
export const loadSession = createMiddleware<DashEnv>(async (c, next) => {
  const { adminToken, previous } = c.var.scope.config;
  const key = await sessionKey(adminToken);
  const previousKey = previous.adminToken === undefined ? undefined : await sessionKey(previous.adminToken);
  c.set("sessionKey", key);
  c.set("previousSessionKey", previousKey);
  const now = c.var.scope.deps.now();
  const cookie = getCookie(c, cookieName(c));
  let session = await decodeSession(key, cookie, now.getTime());
  // During a rotation a cookie signed under the previous admin token is read, then signed again below.
  const signedBefore =
    session === null &&
    previousKey !== undefined &&
    (session = await decodeSession(previousKey, cookie, now.getTime())) !== null;
  if (session?.signedIn && !(await sessionIsLive(c.var.scope.db, session, now))) session = null; // signed out
  if (session && signedBefore) {
    await writeSession(c, session);
  } else if (session) {
    c.set("session", session);
    c.set("csrf", await csrfToken(key, session));
  } else {
    await writeSession(c, newSession(now.getTime(), false));
  }
  await next();
});

function refused(c: DashContext, why: string) {
  return renderBare(
    c,
    "Request refused",
    <div class="alert error" role="alert">
      <h1>Request refused</h1>
      <p>{why}</p>
      <p>
        <a href={dashPath("/")}>Go back to the dashboard</a> and try again.
      </p>
    </div>,
    403,
  );
}

/** Every state-changing request: same origin, and the session's synchroniser token in the form. */
export const verifyCsrf = createMiddleware<DashEnv>(async (c, next) => {
  if (c.req.method === "GET" || c.req.method === "HEAD") return next();
  if (!sameOrigin(c.req.url, c.req.raw.headers)) return refused(c, "The form was sent from another site.");
  const type = c.req.header("content-type") ?? "";
  if (!/^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(type))
    return refused(c, "Send the dashboard's own forms only.");
  const form = await c.req.parseBody();
  const previousKey = c.get("previousSessionKey");
  const valid =
    (await csrfTokenValid(c.get("sessionKey"), c.get("session"), form._csrf)) ||
    (previousKey !== undefined && (await csrfTokenValid(previousKey, c.get("session"), form._csrf))); // a form shown before a rotation
  if (!valid) {
    return refused(
      c,
      "The form has expired or does not belong to this session (for example after signing in again in another tab).",
    );
  }
  return next();
});

/** Pages past sign-in; sets the API client that acts as the operator or as the person signed in. */
export const requireSignIn = (apiFetch: ApiFetch) =>
  createMiddleware<DashEnv>(async (c, next) => {
    const session = c.get("session");
    const toSignIn = () => {
      const next = c.req.method === "GET" ? `?next=${encodeURIComponent(new URL(c.req.url).pathname)}` : "";
      return c.redirect(dashPath(`/sign-in${next}`), 303);
    };
    if (!session.signedIn) return toSignIn();
    if (session.userId === undefined) {
      c.set("user", undefined);
      c.set("api", apiClient(c, apiFetch, { adminToken: c.var.scope.config.adminToken }));
      return next();
    }
    // A person's session ends when people's sign-in is switched off, or the person is gone.
    const user = c.var.scope.config.oidc ? await userById(c.var.scope.db, session.userId) : undefined;
    if (!user) {
      await endSession(c.var.scope.db, session);
      return toSignIn();
    }
    c.set("user", user);
    c.set("api", apiClient(c, apiFetch, { principal: { kind: "user", userId: user.id, email: user.email } }));
    return next();
  });

/** Sign-in sends its user back only to a path of the dashboard itself (no open redirect). */
export function safeNext(value: unknown): string {
  if (typeof value === "string" && /^\/dashboard(\/[A-Za-z0-9_\-/]*)?$/.test(value) && !value.includes("//"))
    return value;
  return dashPath("/projects");
}

function SignInForm(props: { csrf: string; next: string; error?: string; oidc: boolean }) {
  return (
    <div class="card">
      <h1>Sign in to Edge Gateway</h1>
      {props.error && (
        <div class="alert error" role="alert">
          <p>{props.error}</p>
        </div>
      )}
      {props.oidc && (
        <>
          <p>
            {/* A link, not a form: the page's CSP allows forms to post only here, and the provider is elsewhere. */}
            <a class="button" href={`${dashPath("/sign-in/oidc")}?${new URLSearchParams({ next: props.next })}`}>
              Sign in with single sign-on
            </a>
          </p>
          <h2>Operator</h2>
        </>
      )}
      <form method="post" action={dashPath("/sign-in")} class="stack">
        <Csrf token={props.csrf} />
        <input type="hidden" name="next" value={props.next} />
        <Field
          label="Admin token"
          name="token"
          type="password"
          required
          autocomplete="current-password"
          hint="The operator credential (ADMIN_TOKEN) of this installation."
          error={props.error ? "Not accepted." : undefined}
        />
        <div>
          <button type="submit">Sign in</button>
        </div>
      </form>
    </div>
  );
}

export function registerAuth(dash: DashRouter) {
  dash.get("/sign-in", (c) => {
    if (c.get("session").signedIn) return c.redirect(safeNext(c.req.query("next")), 303);
    return renderBare(
      c,
      "Sign in",
      <SignInForm csrf={c.get("csrf")} next={safeNext(c.req.query("next"))} oidc={c.var.scope.config.oidc !== null} />,
    );
  });

  dash.post("/sign-in", async (c) => {
    const form = await c.req.parseBody();
    const next = safeNext(form.next);
    const now = c.var.scope.deps.now().getTime();
    const ip = clientIp(c.req.raw.headers);
    const throttle = await countSignInAttempt(c.env.DB, ip, now);
    if (!throttle.allowed) {
      // Not the address: the request id finds the request; an address is a person's data.
      log("warn", "dashboard sign-in throttled", { request_id: c.var.scope.requestId });
      c.header("Retry-After", String(throttle.retryAfterSeconds));
      // Refused unchecked, the right token too: checking it here would let guessing go on at full speed.
      const error = `Too many sign-in attempts from your address (at most ${MAX_ATTEMPTS} in ${waitText(WINDOW_MS / 1000)}). This attempt was not checked. Try again in ${waitText(throttle.retryAfterSeconds)}.`;
      return renderBare(
        c,
        "Sign in",
        <SignInForm csrf={c.get("csrf")} next={next} error={error} oidc={c.var.scope.config.oidc !== null} />,
        429,
      );
    }
    const token = formText(form, "token");
    if (!(await secretsEqual(token, c.var.scope.config.adminToken))) {
      log("warn", "dashboard sign-in refused", { request_id: c.var.scope.requestId });
      const window = waitText(WINDOW_MS / 1000);
      const left =
        throttle.remaining === 0
          ? `That was the last attempt for up to ${window}.`
          : `You have ${throttle.remaining} more attempt${throttle.remaining === 1 ? "" : "s"} in the next ${window}.`;
      const error = `That is not the admin token of this installation. Check it and try again. ${left}`;
      return renderBare(
        c,
        "Sign in",
        <SignInForm csrf={c.get("csrf")} next={next} error={error} oidc={c.var.scope.config.oidc !== null} />,
        403,
      );
    }
    await clearAttempts(c.env.DB, ip);
    // A fresh session id at sign-in: a session planted before sign-in is worth nothing after it.
    const session = newSession(now, true);
    await storeSession(c.var.scope.db, session, new Date(now));
    await writeSession(c, session);
    return c.redirect(next, 303);
  });

  dash.post("/sign-out", async (c) => {
    await endSession(c.var.scope.db, c.get("session"));
    deleteCookie(c, cookieName(c), { path: isHttps(c) ? "/" : dashPath(""), secure: isHttps(c) });
    return c.redirect(dashPath("/sign-in"), 303);
  });
}
