import { z } from "@hono/zod-openapi";
import { PROBLEM_CONTENT_TYPE, PROBLEMS, type ProblemCode } from "./errors";
import { ID_PATTERN, type IdPrefix } from "./ids";

export const Timestamp = z.iso.datetime().openapi({ example: "2026-11-21T12:00:00.000Z" });
export const rfc3339 = (date: Date) => date.toISOString();
export const rfc3339OrNull = (date: Date | null) => (date ? date.toISOString() : null);

export const ProblemSchema = z
  .object({
    type: z.string().openapi({ example: "urn:edge-gateway:problem:not_found" }),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.enum(Object.keys(PROBLEMS) as [ProblemCode, ...ProblemCode[]]),
    request_id: z.string(),
    errors: z
      .array(z.object({ location: z.string(), field: z.string(), message: z.string() }))
      .optional()
      .openapi({ description: "Each invalid field, for `validation_failed`." }),
  })
  .openapi("Problem", { description: "RFC 9457 problem details." });

export const jsonContent = <T extends z.ZodType>(schema: T, description: string) => ({
  content: { "application/json": { schema } },
  description,
});

export const jsonBodyOf = <T extends z.ZodType>(schema: T) => ({
  body: { content: { "application/json": { schema } }, required: true },
});

export const problemDescriptions: Record<number, string> = {
  400: "Invalid input (`validation_failed`, `malformed_json`, `bad_request`).",
  401: "Missing, invalid, expired or revoked credentials.",
  403: 'The credential may not do this (`forbidden`), or lacks the route\'s scope (`insufficient_scope`, with `WWW-Authenticate: Bearer error="insufficient_scope", scope="…"`).',
  404: "No such resource, or not one the credential may see.",
  409: "The resource's state does not allow this.",
  410: "The resource existed but is no longer kept.",
  413: "The request body is too large.",
  415: "The request body is not JSON.",
  422: "The `Idempotency-Key` was used before for a different request.",
  405: "The path does not take this method; `Allow` lists those it takes.",
  429: "Too many requests (`rate_limited`): wait `Retry-After` seconds.",
  500: "The gateway failed (`internal_error`: quote the `request_id`), or a setting is missing or malformed (`configuration_error`).",
  502: "The app could not be reached, or its answer could not be passed on (`bad_gateway`).",
  504: "The app did not answer in time (`gateway_timeout`), or the run passed its `Cancel-After` (`run_deadline`).",
  503: "A service the gateway depends on is unavailable; try again.",
};

export type ProblemStatus = keyof typeof problemDescriptions;

// A type, not an interface: the OpenAPI types' `x-…` index signature accepts a type literal only.
export type StringHeader = {
  description: string;
  required: boolean;
  schema: { type: "string" };
};

export const stringHeader = (description: string, required = false): StringHeader => ({
  description,
  required,
  schema: { type: "string" },
});

/** `X-Request-Id`: on every answer of the gateway, success or problem. */
export const REQUEST_ID_HEADER = {
  "X-Request-Id": stringHeader("The request's id, also in the problem's `request_id` and in the gateway's logs.", true),
};

/** The headers the gateway sets on a problem of this status (besides `X-Request-Id`), required where every such problem has them. */
export function problemHeaders(
  status: ProblemStatus,
  { required }: { required: boolean },
): Record<string, StringHeader> {
  switch (status) {
    case 401:
      return {
        "WWW-Authenticate": stringHeader(
          'The Bearer challenge (RFC 6750), with `error="invalid_token"` or `error="invalid_request"` when a credential was sent.',
          required,
        ),
      };
    case 403:
      return {
        "WWW-Authenticate": stringHeader(
          'With `insufficient_scope`: `Bearer error="insufficient_scope", scope="…"`, the scope the operation needs.',
          required,
        ),
      };
    case 405:
      return { Allow: stringHeader("The methods this path takes.", required) };
    case 429:
      return {
        "Retry-After": stringHeader("Seconds to wait before retrying.", required),
        "RateLimit-Policy": stringHeader(
          'The limit that was reached (IETF httpapi draft form, e.g. `"runs";q=6000;w=60`).',
          required,
        ),
        RateLimit: stringHeader('What is left of it (`"runs";r=0;t=60`).', required),
      };
    case 503:
      return { "Retry-After": stringHeader("Seconds to wait before retrying, when the gateway knows.") };
    default:
      return {};
  }
}

function problemResponses(statuses: ProblemStatus[], required: boolean) {
  const content = { [PROBLEM_CONTENT_TYPE]: { schema: ProblemSchema } };
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        content,
        description: problemDescriptions[status]!,
        headers: { ...REQUEST_ID_HEADER, ...problemHeaders(status, { required }) },
      },
    ]),
  );
}

/** The problem responses a route may give, to spread into its `responses`. */
export const problems = (...statuses: ProblemStatus[]) => problemResponses(statuses, false);

/**
 * Problem responses whose headers are promised (`required`): for operations whose every answer of a
 * status is the gateway's own (an async run's), proved by `test/workers/run-contract.test.ts`.
 */
export const problemsWithHeaders = (...statuses: ProblemStatus[]) => problemResponses(statuses, true);

/** Errors every authenticated management route can give. */
export const AUTHENTICATED_PROBLEMS = problems(400, 401, 404);
/** Errors of an authenticated route that needs a scope (403 `insufficient_scope` without it). */
export const SCOPED_PROBLEMS = problems(400, 401, 403, 404);

export const idParam = (name: string, prefix: IdPrefix, example: string) =>
  z
    .string()
    .regex(ID_PATTERN(prefix))
    .openapi({ param: { name, in: "path" }, example });

export const PROJECT_ID_EXAMPLE = "proj_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c";

export const ProjectParams = z.object({
  project_id: idParam("project_id", "proj", PROJECT_ID_EXAMPLE),
});

export const ListQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(20).openapi({ description: "Page size, 1 to 100." }),
    cursor: z.string().max(512).optional().openapi({ description: "`next_cursor` of the previous page." }),
  })
  .strict();

export const listOf = <T extends z.ZodType>(item: T, name: string) =>
  z
    .object({
      data: z.array(item),
      next_cursor: z
        .string()
        .nullable()
        .openapi({ description: "Pass as `cursor` for the next page; null on the last page." }),
    })
    .openapi(name);
