import { ApiError } from "./errors";
import { renderError } from "./render-error";
import type { Router } from "./router";

function routePattern(path: string): RegExp {
  const source = path
    .split("/")
    .map((segment) => {
      if (segment === "*") return ".*";
      // `:name{pattern}`: the pattern, which may span segments (the run proxy's `{path}`).
      const pattern = /^:[a-z_]+\{(.+)\}$/i.exec(segment);
      if (pattern) return pattern[1]!;
      if (segment.startsWith(":")) return "[^/]+";
      return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    })
    .join("/");
  return new RegExp(`^${source}/?$`);
}

/**
 * The methods some route of `app` answers for `path`: the `Allow` header of a 405. A GET route implies
 * HEAD (Hono answers it with the GET handler) unless `path` is one of `headRefused`.
 */
export function allowedMethods(app: Router, path: string, headRefused: readonly RegExp[] = []): string[] {
  const methods = new Set<string>();
  const impliesHead = !headRefused.some((pattern) => pattern.test(path));
  for (const route of app.routes) {
    if (route.method === "ALL" || !routePattern(route.path).test(path)) continue;
    methods.add(route.method);
    if (route.method === "GET" && impliesHead) methods.add("HEAD");
  }
  return [...methods].sort();
}

/**
 * Installs the error handler and the 404/405 answer on the top-level router. `headRefused`: paths
 * whose GET handler refuses HEAD itself, so a 405's `Allow` must not offer it.
 */
export function installErrorHandling(
  app: Router,
  {
    headRefused = [],
    hint = () => null,
  }: {
    headRefused?: readonly RegExp[];
    /** What the caller may have meant by a path no route serves (a run's URL without its function), or null. */
    hint?: (path: string) => string | null;
  } = {},
) {
  app.onError(renderError);
  app.notFound((c) => {
    const allow = allowedMethods(app, c.req.path, headRefused);
    if (allow.length > 0) {
      const detail = `${c.req.method} is not allowed on ${c.req.path}; use ${allow.join(", ")}.`;
      return renderError(new ApiError("method_not_allowed", detail, { headers: { Allow: allow.join(", ") } }), c);
    }
    const more = hint(c.req.path);
    return renderError(
      new ApiError("not_found", `No route for ${c.req.method} ${c.req.path}.${more === null ? "" : ` ${more}`}`),
      c,
    );
  });
}
