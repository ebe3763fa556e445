import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { type DashContext, dashPath } from "./context";
import { aesKeyFromSecret } from "../platform/crypto";
import { fromBase64Url, toBase64Url } from "../platform/encoding";

/**
 * A value that must survive exactly one redirect (POST/redirect/GET) without ever being in a URL: the
 * new service account token. It rides in a short-lived cookie, sealed with AES-256-GCM under a key
 * derived from ADMIN_TOKEN by HKDF and bound to the session and the page it is for, and the GET that
 * shows it deletes it, so a reload (or the back button) shows it no more and creates nothing.
 */
const FLASH_TTL_SECONDS = 120;
const encoder = new TextEncoder();
const flashKey = (adminToken: string) => aesKeyFromSecret(adminToken, "edge-gateway/dashboard", "flash-aes-gcm-v1");

const https = (c: DashContext) => new URL(c.req.url).protocol === "https:";
const cookieName = (c: DashContext) => (https(c) ? "__Host-eg_flash" : "eg_flash");
const cookiePath = (c: DashContext) => (https(c) ? "/" : dashPath(""));
/** What the sealed value is bound to: this session, and the page that may show it. */
const boundTo = (c: DashContext, page: string) => encoder.encode(`${c.get("session").sid}\n${page}`);

/** Seals `value` for the next GET of `page` in this session. */
export async function setFlash(c: DashContext, page: string, value: unknown): Promise<void> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(
    await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: boundTo(c, page) },
      await flashKey(c.var.scope.config.adminToken),
      encoder.encode(JSON.stringify(value)),
    ),
  );
  const cookie = new Uint8Array(iv.length + sealed.length);
  cookie.set(iv);
  cookie.set(sealed, iv.length);
  setCookie(c, cookieName(c), toBase64Url(cookie), {
    httpOnly: true,
    secure: https(c),
    sameSite: "Strict",
    path: cookiePath(c),
    maxAge: FLASH_TTL_SECONDS,
  });
}

/** The value sealed for `page`, once: the cookie is deleted whatever it held. Undefined when absent, expired or not this session's. */
export async function takeFlash<T>(c: DashContext, page: string): Promise<T | undefined> {
  const value = getCookie(c, cookieName(c));
  if (!value) return undefined;
  deleteCookie(c, cookieName(c), { path: cookiePath(c), secure: https(c) });
  const { adminToken, previous } = c.var.scope.config;
  // The current admin token's key, then during a rotation the previous one's (a flash lives 2 minutes).
  for (const token of previous.adminToken === undefined ? [adminToken] : [adminToken, previous.adminToken]) {
    try {
      const bytes = fromBase64Url(value);
      const plain = await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: bytes.subarray(0, 12), additionalData: boundTo(c, page) },
        await flashKey(token),
        bytes.subarray(12),
      );
      return JSON.parse(new TextDecoder().decode(plain)) as T;
    } catch {
      // tampered, another session's or page's, or sealed under another admin token
    }
  }
  return undefined;
}
