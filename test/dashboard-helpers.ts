import type { Client } from "./helpers";
import { ADMIN } from "./helpers";

export const ORIGIN = "http://localhost";
let visitors = 0;

/** A browser-like visitor of the dashboard: keeps its cookies, reads the CSRF token from each page. */
export function visitor(api: Client, options: { ip?: string; origin?: string | null } = {}) {
  const jar = new Map<string, string>();
  let cookie = "";
  let csrf = "";
  // Each visitor its own address, so sign-in throttling of one test never reaches another.
  const ip = options.ip ?? `203.0.113.${(visitors = (visitors % 250) + 1)}`;

  function remember(response: Response) {
    for (const header of response.headers.getSetCookie()) {
      const [pair = ""] = header.split(";");
      const name = pair.slice(0, pair.indexOf("="));
      // A deleted cookie comes back empty with Max-Age=0.
      if (pair.endsWith("=") || /;\s*max-age=0/i.test(header)) jar.delete(name);
      else jar.set(name, pair);
    }
    cookie = [...jar.values()].join("; ");
  }

  async function get(path: string) {
    const response = await api.call(path, { token: null, headers: { Cookie: cookie, "CF-Connecting-IP": ip } });
    remember(response);
    const html = await response.text();
    const token = /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
    if (token) csrf = token;
    return { status: response.status, html, headers: response.headers };
  }

  async function post(path: string, fields: Record<string, string | string[]>, extra: { csrf?: string | null; origin?: string | null } = {}) {
    // A list is a repeated field, as a form's checkboxes send it.
    const form = new URLSearchParams(Object.entries(fields).flatMap(([name, value]) => (Array.isArray(value) ? value : [value]).map((v) => [name, v])));
    const token = extra.csrf === undefined ? csrf : extra.csrf;
    if (token !== null) form.set("_csrf", token);
    const headers: Record<string, string> = { Cookie: cookie, "Content-Type": "application/x-www-form-urlencoded", "CF-Connecting-IP": ip };
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
    get cookie() {
      return cookie;
    },
    set cookie(value: string) {
      jar.clear();
      for (const pair of value.split(/;\s*/).filter(Boolean)) jar.set(pair.slice(0, pair.indexOf("=")), pair);
      cookie = value;
    },
    get csrf() {
      return csrf;
    },
  };
}

/** Text of the page without tags, for assertions about what a person reads. */
export const text = (html: string) => html.replace(/<[^>]+>/g, " ").replace(/\s+/g, " ");
