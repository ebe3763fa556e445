import { createMiddleware } from "hono/factory";
import type { DashEnv } from "./context";

/** Only first-party files: no inline script or style, no framing, forms post only here. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

/** Security headers of every dashboard response. Pages hold tokens and project data: never cached. */
export const securityHeaders = createMiddleware<DashEnv>(async (c, next) => {
  await next();
  const h = c.res.headers;
  h.set("Content-Security-Policy", CONTENT_SECURITY_POLICY);
  h.set("X-Content-Type-Options", "nosniff");
  h.set("X-Frame-Options", "DENY");
  // Not no-referrer: with it, browsers send `Origin: null` on same-origin POSTs, which the CSRF check refuses.
  h.set("Referrer-Policy", "same-origin");
  h.set("Cross-Origin-Opener-Policy", "same-origin");
  h.set("Cross-Origin-Resource-Policy", "same-origin");
  h.set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()");
  if (!h.has("Cache-Control")) h.set("Cache-Control", "no-store");
  if (new URL(c.req.url).protocol === "https:") h.set("Strict-Transport-Security", "max-age=31536000");
});
