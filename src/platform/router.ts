import { OpenAPIHono } from "@hono/zod-openapi";
import type { ZodError } from "zod";
import { ApiError, type FieldError, invalidFields } from "./errors";
import type { AppEnv } from "./scope";

const LOCATIONS: Record<string, string> = {
  json: "body",
  param: "path",
  query: "query",
  header: "header",
  cookie: "cookie",
};

export function fieldErrors(error: ZodError, location: string): FieldError[] {
  return error.issues.flatMap((issue) => {
    const field = issue.path.map(String).join(".");
    if (issue.code === "unrecognized_keys") {
      return issue.keys.map((key) => ({
        location,
        field: field ? `${field}.${key}` : key,
        message: "is not a known field",
      }));
    }
    return [{ location, field: field || "(root)", message: issue.message }];
  });
}

/**
 * Every router of the service is made here, so validation failures look the same everywhere.
 * A path parameter that cannot be an id of ours names nothing: that is a 404, like an unknown id.
 */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result, c) => {
      if (result.success) return;
      if (result.target === "param") {
        const [name, value] = Object.entries(c.req.param() as Record<string, string>).find(([key]) =>
          result.error.issues.some((issue) => issue.path[0] === key),
        ) ?? ["resource", ""];
        const what = name.replace(/_id$/, "").replace(/_/g, " ");
        // A parameter with a rule of its own (an origin, not an id) says what it must look like, so that
        // `…/webhook-receivers/https%3A%2F%2Fhooks.example.com%2Fin` is told to drop the path.
        const rule = result.error.issues.find((issue) => issue.path[0] === name && issue.code === "custom");
        if (!name.endsWith("_id") && rule)
          throw new ApiError("not_found", `No ${what} '${value}': expected ${rule.message}.`);
        throw new ApiError("not_found", `No ${what} with id '${value}'.`);
      }
      throw invalidFields(fieldErrors(result.error, LOCATIONS[result.target] ?? result.target));
    },
  });
}

export type Router = ReturnType<typeof createRouter>;
