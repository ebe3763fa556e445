import { env } from "cloudflare:workers";
import { TEST_OIDC } from "./secrets";

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Cloudflare {
    interface Env {
      TEST_OIDC_OTHER_ISSUER: string;
    }
  }
}

/** The provider the gateway signs people in with (test/global/oidc.mjs), and another issuer. */
export const ISSUER = env.OIDC_ISSUER!;
export const OTHER_ISSUER = env.TEST_OIDC_OTHER_ISSUER;

let accounts = 0;

/** A new account at a provider (a fresh subject each call), with the claims it releases. */
export async function addAccount(
  claims: { email?: string; email_verified?: boolean; name?: string },
  issuer = ISSUER,
): Promise<string> {
  const sub = `user-${Date.now().toString(36)}-${(accounts++).toString(36)}`;
  const response = await fetch(`${issuer}/__fixture/accounts`, {
    method: "POST",
    body: JSON.stringify({ sub, ...claims }),
  });
  if (response.status !== 204) throw new Error(`add account: ${response.status}`);
  return sub;
}

export async function addClient(
  client: { client_id: string; client_secret: string; redirect_uris: string[] },
  issuer = ISSUER,
) {
  const response = await fetch(`${issuer}/__fixture/clients`, { method: "POST", body: JSON.stringify(client) });
  if (response.status !== 204) throw new Error(`add client: ${response.status}`);
}

/**
 * A person at the provider: from the authorization URL, through its login form, to the redirect back
 * to the client (returned, not followed). Keeps the provider's cookies like a browser.
 */
export async function loginAtProvider(authorizationUrl: string, login: string): Promise<URL> {
  const jar = new Map<string, string>();
  const provider = new URL(authorizationUrl).origin;
  let url = authorizationUrl;
  let form: string | undefined;
  for (let step = 0; step < 10; step++) {
    const headers: Record<string, string> = { Cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") };
    if (form) headers["Content-Type"] = "application/x-www-form-urlencoded";
    const response = await fetch(url, { method: form ? "POST" : "GET", headers, body: form, redirect: "manual" });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair = ""] = cookie.split(";");
      jar.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1));
    }
    await response.text();
    form = undefined;
    const location = response.headers.get("location");
    if (location) {
      const next = new URL(location, url);
      if (next.origin !== provider) return next;
      url = next.toString();
    } else if (response.status === 200 && new URL(url).pathname.startsWith("/interaction/")) {
      form = new URLSearchParams({ login }).toString();
    } else {
      throw new Error(`provider answered ${response.status} at ${url}`);
    }
  }
  throw new Error("too many steps at the provider");
}

/** The redirect URI of the gateway's client in the tests. */
export const CALLBACK = new URL(TEST_OIDC.redirectUri);
