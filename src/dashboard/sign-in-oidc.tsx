import { and, eq, gt, lte } from "drizzle-orm";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { beginSignIn, finishSignIn, type OidcSettings, SignInError } from "../auth/oidc";
import { upsertUser } from "../auth/users";
import { signInRequests } from "../db/schema";
import { claimInvites } from "../members/store";
import { sha256Hex } from "../platform/crypto";
import { isHttps, safeNext, writeSession } from "./auth";
import { type DashContext, type DashRouter, dashPath } from "./context";
import { renderBare } from "./layout";
import { newSession } from "./session";
import { storeSession } from "./session-store";
import { log, redact } from "../platform/log";

/** How long a person may take at their provider before the sign-in must start again. */
export const SIGN_IN_REQUEST_TTL_MS = 10 * 60 * 1000;
const CALLBACK = "/oidc/callback";

/**
 * The browser's handle on its sign-in under way. SameSite=Lax, not Strict: the provider sends the
 * browser back with a cross-site navigation, which carries no Strict cookie. The handle alone is
 * worthless: the state, nonce and PKCE verifier stay in D1, and the callback uses them once.
 */
const pendingCookie = (c: DashContext) => (isHttps(c) ? "__Host-eg_oidc" : "eg_oidc");
const pendingCookiePath = (c: DashContext) => (isHttps(c) ? "/" : dashPath("/oidc"));

function settingsOf(c: DashContext): OidcSettings | null {
  const oidc = c.var.scope.config.oidc;
  if (!oidc) return null;
  const outbound = c.var.scope.deps.outbound;
  return {
    ...oidc,
    allowInsecure: c.var.scope.config.allowInsecureTargets,
    fetch: (request) => outbound.fetch(request),
  };
}

const redirectUri = (c: DashContext) => new URL(dashPath(CALLBACK), c.req.url).toString();

function failed(c: DashContext, detail: string, status: 400 | 403 | 404 | 502) {
  // The provider's words are redacted too: an error description may quote what it was sent.
  log("warn", "dashboard sign-in with OpenID Connect failed", {
    request_id: c.var.scope.requestId,
    detail: redact(detail),
  });
  return renderBare(
    c,
    "Sign-in failed",
    <div class="alert error" role="alert">
      <h1>Sign-in failed</h1>
      <p>{detail}</p>
      <p>
        <a href={dashPath("/sign-in")}>Sign in again</a>
      </p>
    </div>,
    status,
  );
}

export function registerOidcSignIn(dash: DashRouter) {
  // A GET (a link on the sign-in page): it only starts a sign-in bound to this browser's own cookie, so a
  // request forged by another site achieves nothing, and a form could not follow the redirect off-site
  // under the dashboard's CSP (`form-action 'self'`).
  dash.get("/sign-in/oidc", async (c) => {
    const settings = settingsOf(c);
    if (!settings)
      return failed(
        c,
        "Single sign-on is not configured on this installation; the operator signs in with the admin token.",
        404,
      );
    const next = safeNext(c.req.query("next"));
    const now = c.var.scope.deps.now();
    let begun;
    try {
      begun = await beginSignIn(settings, redirectUri(c), now.getTime());
    } catch (error) {
      if (error instanceof SignInError) return failed(c, error.message, 502);
      throw error;
    }
    const handle = crypto.randomUUID();
    const db = c.var.scope.db;
    await db.batch([
      // Sign-ins abandoned at the provider go on the way.
      db.delete(signInRequests).where(lte(signInRequests.expiresAt, now)),
      db.insert(signInRequests).values({
        handleHash: await sha256Hex(handle),
        ...begun.pending,
        next,
        expiresAt: new Date(now.getTime() + SIGN_IN_REQUEST_TTL_MS),
      }),
    ]);
    setCookie(c, pendingCookie(c), handle, {
      httpOnly: true,
      secure: isHttps(c),
      sameSite: "Lax",
      path: pendingCookiePath(c),
      maxAge: SIGN_IN_REQUEST_TTL_MS / 1000,
    });
    return c.redirect(begun.url.toString(), 303);
  });

  dash.get(CALLBACK, async (c) => {
    const settings = settingsOf(c);
    if (!settings) return failed(c, "Single sign-on is not configured on this installation.", 404);
    const handle = getCookie(c, pendingCookie(c));
    deleteCookie(c, pendingCookie(c), { path: pendingCookiePath(c), secure: isHttps(c) });
    const now = c.var.scope.deps.now();
    const db = c.var.scope.db;
    // Taken and deleted in one statement: a callback is used once, a replay finds nothing.
    const [pending] =
      handle && handle.length <= 64
        ? await db
            .delete(signInRequests)
            .where(and(eq(signInRequests.handleHash, await sha256Hex(handle)), gt(signInRequests.expiresAt, now)))
            .returning()
        : [];
    if (!pending)
      return failed(
        c,
        "This sign-in has expired, was already used, or was started in another browser. Start again.",
        400,
      );
    let identity;
    try {
      identity = await finishSignIn(settings, redirectUri(c), new URL(c.req.url), pending, now.getTime());
    } catch (error) {
      if (error instanceof SignInError) return failed(c, error.message, 403);
      throw error;
    }
    const user = await upsertUser(db, identity, now);
    await claimInvites(db, user, now);
    // A fresh session id at sign-in: a session planted before sign-in is worth nothing after it.
    const session = newSession(now.getTime(), true, user.id);
    await storeSession(db, session, now);
    await writeSession(c, session);
    // A page that moves on, not a redirect: after the provider's cross-site redirect, the browser would
    // not send the new SameSite=Strict cookie on a redirect, but does on this page's own navigation.
    return renderBare(
      c,
      "Signed in",
      <div class="card">
        <h1>Signed in</h1>
        <p>
          Welcome{user.name ? `, ${user.name}` : ""}. <a href={pending.next}>Continue to the dashboard</a>
        </p>
      </div>,
      200,
      pending.next,
    );
  });
}
