import { createRoute, z } from "@hono/zod-openapi";
import { requires } from "../auth/access";
import { CERTIFICATE_STATUSES, DOMAIN_ERROR_CODES, DOMAIN_STATUSES } from "../db/schema";
import {
  SCOPED_PROBLEMS,
  jsonBodyOf,
  jsonContent,
  ListQuery,
  listOf,
  ProjectParams,
  problems,
  Timestamp,
} from "../platform/openapi";

const DOMAIN_EXAMPLE = "api.example.com";

export const DomainSchema = z
  .object({
    domain: z
      .string()
      .openapi({ example: DOMAIN_EXAMPLE, description: "Normalised: lower case, punycode, no trailing dot." }),
    project_id: z.string(),
    region: z.string().openapi({ example: "us-east-1" }),
    status: z.enum(DOMAIN_STATUSES),
    dns_record: z
      .object({
        type: z
          .enum(["CNAME", "ALIAS"])
          .openapi({ description: "`ALIAS` (also ANAME or flattened CNAME) for an apex, which cannot hold a CNAME." }),
        name: z.string().openapi({ example: DOMAIN_EXAMPLE }),
        value: z.string().openapi({ example: "proxy.aws.us-east-1.gateway.example.com" }),
      })
      .openapi({ description: "The record to create at the customer's DNS provider, exactly as given." }),
    ownership_record: z
      .object({
        type: z.literal("TXT"),
        name: z.string().openapi({ example: `_gateway-challenge.${DOMAIN_EXAMPLE}` }),
        value: z.string().openapi({ example: "gw-4f1c0b5e9a7d2c3b8e6f0a1d2c3b4a59" }),
      })
      .openapi({
        description:
          "Proves control of the hostname: random and unique to this domain. Needed (beside the CNAME) when `ownership_required` is true.",
      }),
    ownership_required: z.boolean().openapi({
      description:
        "True while the hostname is contested: another project also claims it, or held it validated in the last 30 days. Then only the `ownership_record` beside the CNAME validates it.",
    }),
    last_error: z
      .object({
        code: z.enum(DOMAIN_ERROR_CODES),
        message: z.string().openapi({ description: "What was seen, what was expected, and what to do." }),
      })
      .nullable(),
    last_checked_at: Timestamp.nullable(),
    next_check_at: Timestamp.nullable().openapi({
      description: "The next automatic attempt; null when none is planned.",
    }),
    auto_validation_ends_at: Timestamp.openapi({
      description: "Automatic attempts stop here (2 days after creation); manual validation works at any time.",
    }),
    validated_at: Timestamp.nullable(),
    certificate_status: z.enum(CERTIFICATE_STATUSES),
    created_at: Timestamp,
  })
  .openapi("Domain");

export const CreateDomainBody = z
  .object({
    domain: z
      .string()
      .max(1000)
      .openapi({ example: DOMAIN_EXAMPLE, description: "An apex (`example.com`) or, preferably, a subdomain." }),
    region: z.string().openapi({
      example: "us-east-1",
      description: "One of the installation's regions; the domain always resolves to it.",
    }),
  })
  .strict()
  .openapi("CreateDomain");

export const DomainParams = ProjectParams.extend({
  domain: z
    .string()
    .max(1000)
    .openapi({ param: { name: "domain", in: "path" }, example: DOMAIN_EXAMPLE, description: "The hostname itself." }),
});

const tags = ["Custom domains"];

export const createDomain = createRoute({
  operationId: "createDomain",
  method: "post",
  path: "/projects/{project_id}/domains",
  tags,
  ...requires("domains:write"),
  summary: "Add a custom domain",
  description:
    "Starts pending; the answer carries the DNS record to create (and the ownership record, needed when another project also claims the hostname). The first automatic attempt follows within a minute, then every 30 minutes for 2 days; manual validation works at any time. 409 when this project already has the hostname or has reached its domain limit (`MAX_DOMAINS_PER_PROJECT`).",
  request: { params: ProjectParams, ...jsonBodyOf(CreateDomainBody) },
  responses: {
    201: jsonContent(DomainSchema, "The new domain, pending."),
    ...problems(400, 401, 403, 404, 409, 413, 415),
  },
});

export const listDomains = createRoute({
  operationId: "listDomains",
  method: "get",
  path: "/projects/{project_id}/domains",
  tags,
  ...requires("domains:read"),
  summary: "List custom domains",
  request: { params: ProjectParams, query: ListQuery },
  responses: {
    200: jsonContent(listOf(DomainSchema, "DomainList"), "A page of domains, by name."),
    ...SCOPED_PROBLEMS,
  },
});

export const getDomain = createRoute({
  operationId: "getDomain",
  method: "get",
  path: "/projects/{project_id}/domains/{domain}",
  tags,
  ...requires("domains:read"),
  summary: "Read a custom domain",
  request: { params: DomainParams },
  responses: {
    200: jsonContent(DomainSchema, "The domain and its validation status."),
    ...SCOPED_PROBLEMS,
  },
});

export const deleteDomain = createRoute({
  operationId: "deleteDomain",
  method: "delete",
  path: "/projects/{project_id}/domains/{domain}",
  tags,
  ...requires("domains:write"),
  summary: "Remove a custom domain",
  description: "Removes its certificate (Cloudflare custom hostname) too; the host stops being served at once.",
  request: { params: DomainParams },
  responses: {
    200: jsonContent(DomainSchema, "The domain as it was when removed."),
    ...problems(400, 401, 403, 404, 503),
  },
});

export const validateDomainRoute = createRoute({
  operationId: "validateDomain",
  method: "post",
  path: "/projects/{project_id}/domains/{domain}/validate",
  tags,
  ...requires("domains:write"),
  summary: "Validate a custom domain now",
  description:
    "Checks DNS at once, from pending or failed, also after the automatic window. On a validated domain it only reads back the certificate.",
  request: { params: DomainParams },
  responses: {
    200: jsonContent(DomainSchema, "The domain after the check; `last_error` says what was found."),
    ...SCOPED_PROBLEMS,
  },
});
