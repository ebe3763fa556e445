import type { Client } from "./helpers";
import { ADMIN } from "./helpers";

export const ORIGIN = "http://localhost";
let visitors = 0;

/** A browser-like visitor of the dashboard: keeps its cookies, reads the CSRF token from each page. */
export function visitor(api: Client, options: { ip?: string; origin?: string | null } = {}) {
  // A cookie jar: the session cookie, and the sign-in cookie while a sign-in with a provider is under way.
  const jar = new Map<string, string>();
  const cookieHeader = () => [...jar].map(([name, value]) => `${name}=${value}`).join("; ");
  let csrf = "";
  // Each visitor its own address, so sign-in throttling of one test never reaches another.
  const ip = options.ip ?? `203.0.113.${(visitors = (visitors % 250) + 1)}`;

  function remember(response: Response) {
    for (const header of response.headers.getSetCookie()) {
      const [pair = "", ...attributes] = header.split(";");
      const name = pair.slice(0, pair.indexOf("="));
      const value = pair.slice(pair.indexOf("=") + 1);
      // Only a deletion (Max-Age=0, or an expiry at the epoch) removes a cookie: the tests' clocks are not the real one.
      const expired = attributes.some(
        (a) => /^\s*max-age=0\s*$/i.test(a) || (/^\s*expires=/i.test(a) && Date.parse(a.split("=")[1]!) <= 0),
      );
      if (!value || expired) jar.delete(name);
      else jar.set(name, value);
    }
  }

  async function get(path: string) {
    const response = await api.call(path, { token: null, headers: { Cookie: cookieHeader(), "CF-Connecting-IP": ip } });
    remember(response);
    const html = await response.text();
    const token = /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
    if (token) csrf = token;
    return { status: response.status, html, headers: response.headers };
  }

  async function post(
    path: string,
    fields: Record<string, string | string[]>,
    extra: { csrf?: string | null; origin?: string | null } = {},
  ) {
    // A list is a repeated field, as a form's checkboxes send it.
    const form = new URLSearchParams(
      Object.entries(fields).flatMap(([name, value]) => (Array.isArray(value) ? value : [value]).map((v) => [name, v])),
    );
    const token = extra.csrf === undefined ? csrf : extra.csrf;
    if (token !== null) form.set("_csrf", token);
    const headers: Record<string, string> = {
      Cookie: cookieHeader(),
      "Content-Type": "application/x-www-form-urlencoded",
      "CF-Connecting-IP": ip,
    };
    const origin = extra.origin === undefined ? (options.origin === undefined ? ORIGIN : options.origin) : extra.origin;
    if (origin !== null) headers.Origin = origin;
    const response = await api.call(path, { method: "POST", token: null, headers, rawBody: form.toString() });
    remember(response);
    const html = await response.text();
    const next = /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
    if (next) csrf = next;
    return { status: response.status, html, headers: response.headers, location: response.headers.get("location") };
  }

  async function signIn(token = ADMIN) {
    await get("/dashboard/sign-in");
    const result = await post("/dashboard/sign-in", { token });
    if (result.status === 303) await get(result.location ?? "/dashboard/projects");
    return result;
  }

  return {
    get,
    post,
    signIn,
    /** The Cookie header this visitor sends; setting it replaces every cookie. */
    get cookie() {
      return cookieHeader();
    },
    set cookie(value: string) {
      jar.clear();
      for (const pair of value.split(/;\s*/))
        if (pair.includes("=")) jar.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1));
    },
    get csrf() {
      return csrf;
    },
  };
}

/** Text of the page without tags, for assertions about what a person reads. */
export const text = (html: string) => html.replace(/<[^>]+>/g, " ").replace(/\s+/g, " ");
