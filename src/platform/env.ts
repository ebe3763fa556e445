import { z } from "zod";
import { ApiError } from "./errors";
import { log } from "./log";

/**
 * `Env` is generated from wrangler.toml by `wrangler types` (worker-configuration.d.ts; `npm run types`,
 * checked in CI). Optional secrets and settings cannot be declared there, so they are added here.
 */
interface OptionalSettings {
  /** Cloudflare for SaaS custom hostnames; both or neither. */
  CF_API_TOKEN?: string;
  CF_ZONE_ID?: string;
  /** The Cloudflare API's base URL: a local fake in tests. */
  CF_API_BASE_URL?: string;
  /** How long an async run waits for the app; the default is in the schema below. */
  ASYNC_RUN_TIMEOUT_MS?: string;
  /** The waited runs one keeper holds at once (default 32; docs/runs.md#the-keeper). */
  KEEPER_RUNS_MAX?: string;
  /** Test-only: `manual` keeps keepers' and delivery logs' alarms from sweeping their rows (tests sweep with their own clock). */
  OBJECT_SWEEPS?: string;
  /** Where the delivery log is written: `objects` (default: per project, docs/webhooks.md) or `d1` (the store before, to roll back to). */
  DELIVERY_LOG_STORE?: string;
  CERTIFICATE_PROVIDER?: string;
  CERTIFICATE_AUTHORITY?: string;
  MAX_DOMAINS_PER_PROJECT?: string;
  /** The apps one project may have (default 100; docs/usage.md#capacity-arithmetic). */
  MAX_APPS_PER_PROJECT?: string;
  /** During a rotation only: the secret being replaced, still accepted to read what it signed or sealed. */
  ADMIN_TOKEN_PREVIOUS?: string;
  JWT_SECRET_PREVIOUS?: string;
  WEBHOOK_ENCRYPTION_KEY_PREVIOUS?: string;
  /** How long a run record may wait in its isolate for others (ms; default 1000, 0 sends each at once). */
  USAGE_FLUSH_MS?: string;
  /** "off": the run path takes no records (the benchmark's comparison); "on" or unset: on. */
  USAGE_RECORDING?: string;
  /** The size in bytes past which a project's ledger samples its records (default 5 GiB; docs/usage.md). */
  USAGE_LEDGER_BYTES_MAX?: string;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface Env extends OptionalSettings {}
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Cloudflare {
    // eslint-disable-next-line @typescript-eslint/no-empty-object-type
    interface Env extends OptionalSettings {}
  }
}

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const REGION = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;

const list = (item: z.ZodString, what: string) =>
  z
    .string()
    .transform((value) =>
      value
        .split(",")
        .map((part) => part.trim().toLowerCase())
        .filter(Boolean),
    )
    .pipe(z.array(item).min(1, `needs at least one ${what}`));

const secret = (minLength: number) =>
  z.string({ error: "is not set" }).min(minLength, `must be at least ${minLength} characters`);

// wrangler.toml names every var, so "not configured" is an empty string there.
const optional = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => (value === "" ? undefined : value), schema.optional());

/** A queue consumer invocation's wall-time limit (15 min) less one minute for storing the result. */
export const ASYNC_RUN_TIMEOUT_MAX_MS = 14 * 60_000;

/** The most waited runs a keeper may be set to hold at once (`KEEPER_RUNS_MAX`). */
export const KEEPER_RUNS_LIMIT = 64;

const milliseconds = (fallback: number) =>
  z.coerce.number({ error: "is not a number of milliseconds" }).int().min(1).max(900_000).default(fallback);

/**
 * Usage recording's settings (docs/usage.md), a part of the configuration the usage ledgers' Durable
 * Object reads too (`usageConfigOf`), without the secrets it has no use for.
 */
const UsageSettings = z.object({
  // How long a record waits in its isolate for others (0: it leaves at once).
  USAGE_FLUSH_MS: z.coerce
    .number({ error: "is not a number of milliseconds" })
    .int()
    .min(0)
    .max(600_000, "must be at most 600000")
    .default(1_000),
  // Whether the run path takes records at all ("off": the benchmark's comparison).
  USAGE_RECORDING: z.enum(["on", "off"], { error: 'must be "on" or "off"' }).default("on"),
  // The database size (records, rollups, counts and indexes) past which records are sampled: half the
  // object's 10 GB, the rest for the records kept one in a hundred and the rollups (docs/usage.md).
  USAGE_LEDGER_BYTES_MAX: z.coerce
    .number({ error: "is not a number of bytes" })
    .int()
    .min(1)
    .max(10 * 1024 ** 3, "must be at most 10737418240 (a Durable Object's 10 GB)")
    .default(5 * 1024 ** 3),
});

/** A retention in whole days, at least one, at most a year. */
const days = (fallback: number) =>
  z.coerce
    .number({ error: "is not a number of days" })
    .int("is not a whole number of days")
    .min(1, "must be at least 1")
    .max(365, "must be at most 365")
    .default(fallback);

const ConfigSchema = z
  .object({
    SERVICE_DOMAIN: z.string({ error: "is not set" }).trim().toLowerCase().regex(HOSTNAME, "is not a hostname"),
    API_HOSTNAMES: list(z.string().regex(HOSTNAME, "is not a hostname"), "hostname"),
    REGIONS: list(z.string().regex(REGION, "is not a region such as us-east-1"), "region"),
    DNS_RESOLVER_URL: z.url({ protocol: /^https?$/, error: "is not an http(s) URL" }),
    ADMIN_TOKEN: secret(32),
    JWT_SECRET: secret(32),
    WEBHOOK_ENCRYPTION_KEY: secret(32),
    // Set only while a secret is rotated (docs/operations.md): read, never used to sign or seal.
    ADMIN_TOKEN_PREVIOUS: optional(secret(32)),
    JWT_SECRET_PREVIOUS: optional(secret(32)),
    WEBHOOK_ENCRYPTION_KEY_PREVIOUS: optional(secret(32)),
    CF_API_TOKEN: z.string().min(1).optional(),
    CF_ZONE_ID: z.string().min(1).optional(),
    CF_API_BASE_URL: z.url({ protocol: /^https?$/, error: "is not an http(s) URL" }).optional(),
    ALLOW_INSECURE_TARGETS: z
      .enum(["true", "false"], { error: 'must be "true" or "false"' })
      .default("false")
      .transform((value) => value === "true"),
    RUN_TIMEOUT_MS: milliseconds(120_000),
    RUN_STREAM_IDLE_MS: milliseconds(60_000),
    WEBHOOK_TIMEOUT_MS: milliseconds(10_000),
    OBJECT_SWEEPS: z.enum(["alarm", "manual"], { error: 'must be "alarm" or "manual"' }).default("alarm"),
    DELIVERY_LOG_STORE: z.enum(["d1", "objects"], { error: 'must be "d1" or "objects"' }).default("objects"),
    // A receiver whose every delivery failed this long is disabled (docs/webhook-receivers.md).
    WEBHOOK_RECEIVER_DISABLE_AFTER_HOURS: z.coerce
      .number({ error: "is not a number of hours" })
      .int()
      .min(1)
      .max(24 * 30, "must be at most 720 (30 days)")
      .default(24),
    // The delivery log's retention (docs/webhooks.md#retention): records and attempts, and the bodies and
    // sealed secrets kept for resending, which go first.
    WEBHOOK_RECORD_RETENTION_DAYS: days(30),
    WEBHOOK_BODY_RETENTION_DAYS: days(7),
    // The audit log's retention (docs/operations.md#retention): 90 days by default (docs/architecture.md has
    // what a longer one costs the shared database); at least 30 days, at most 10 years.
    AUDIT_LOG_RETENTION_DAYS: z.coerce
      .number({ error: "is not a number of days" })
      .int("is not a whole number of days")
      .min(30, "must be at least 30")
      .max(3650, "must be at most 3650 (10 years)")
      .default(90),
    OIDC_ISSUER: optional(z.url({ protocol: /^https?$/, error: "is not an http(s) URL" })),
    OIDC_CLIENT_ID: optional(z.string().max(512)),
    OIDC_CLIENT_SECRET: optional(z.string().max(4096)),
    // A queue consumer invocation may run 15 minutes of wall time; the run must leave the last of them
    // to store its result and hand it to the webhook pipeline.
    ASYNC_RUN_TIMEOUT_MS: z.coerce
      .number({ error: "is not a number of milliseconds" })
      .int()
      .min(1)
      .max(
        ASYNC_RUN_TIMEOUT_MAX_MS,
        `must be at most ${ASYNC_RUN_TIMEOUT_MAX_MS} (a queue consumer's 15 minutes, less a minute to store the result)`,
      )
      .default(600_000),
    // Fails closed: without "local" (local development only), certificates need Cloudflare for SaaS.
    CERTIFICATE_PROVIDER: z
      .enum(["cloudflare", "local"], { error: 'must be "cloudflare" or "local"' })
      .default("cloudflare"),
    CERTIFICATE_AUTHORITY: z
      .enum(["lets_encrypt", "google", "ssl_com"], { error: 'must be "lets_encrypt", "google" or "ssl_com"' })
      .default("lets_encrypt"),
    MAX_DOMAINS_PER_PROJECT: z.coerce.number({ error: "is not a number" }).int().min(1).max(10_000).default(100),
    MAX_APPS_PER_PROJECT: z.coerce.number({ error: "is not a number" }).int().min(1).max(10_000).default(100),
    // A choice, not a platform limit: the runs share their keeper's isolate (128 MB) and its one thread (runs/wait/keeper.ts).
    KEEPER_RUNS_MAX: z.coerce
      .number({ error: "is not a number" })
      .int()
      .min(1)
      .max(
        KEEPER_RUNS_LIMIT,
        `must be at most ${KEEPER_RUNS_LIMIT} (the runs share their keeper's 128 MB and one thread)`,
      )
      .default(32),
    ...UsageSettings.shape,
  })
  .refine((c) => c.WEBHOOK_BODY_RETENTION_DAYS <= c.WEBHOOK_RECORD_RETENTION_DAYS, {
    message: "must be at most WEBHOOK_RECORD_RETENTION_DAYS (a body is purged before its record)",
    path: ["WEBHOOK_BODY_RETENTION_DAYS"],
  })
  .refine((c) => Boolean(c.CF_API_TOKEN) === Boolean(c.CF_ZONE_ID), {
    message: "CF_API_TOKEN and CF_ZONE_ID are set together or not at all",
    path: ["CF_ZONE_ID"],
  })
  .refine((c) => [c.OIDC_ISSUER, c.OIDC_CLIENT_ID, c.OIDC_CLIENT_SECRET].filter(Boolean).length % 3 === 0, {
    message: "OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are set together or not at all",
    path: ["OIDC_ISSUER"],
  })
  .refine((c) => c.CERTIFICATE_PROVIDER === "local" || Boolean(c.CF_API_TOKEN && c.CF_ZONE_ID), {
    message:
      'is "cloudflare" (the default), which needs CF_API_TOKEN and CF_ZONE_ID; set them, or CERTIFICATE_PROVIDER = "local" for local development only',
    path: ["CERTIFICATE_PROVIDER"],
  });

export interface Config {
  serviceDomain: string;
  apiHostnames: ReadonlySet<string>;
  regions: readonly string[];
  dnsResolverUrl: string;
  adminToken: string;
  jwtSecret: string;
  webhookEncryptionKey: string;
  /**
   * The secrets a rotation replaces, while it lasts: the previous admin token verifies dashboard cookies
   * it signed (never a credential), the previous JWT secret verifies run JWTs, the previous encryption
   * key opens webhook secrets sealed under it. Undefined outside a rotation.
   */
  previous: { adminToken?: string; jwtSecret?: string; webhookEncryptionKey?: string };
  cloudflare: { apiToken: string; zoneId: string; apiBaseUrl: string | undefined } | null;
  allowInsecureTargets: boolean;
  /** How long the run proxy waits for the app's response headers. */
  runTimeoutMs: number;
  /** How long an app's answer may stay silent between two chunks (a stream may run as long as it keeps talking). */
  runStreamIdleMs: number;
  /** How long one webhook delivery attempt waits for the receiver. */
  webhookTimeoutMs: number;
  /** `OBJECT_SWEEPS`: whether keepers' and delivery logs' alarms sweep their rows (`alarm`, always but in tests) or only a test does (`manual`). */
  objectSweeps: "alarm" | "manual";
  /**
   * `DELIVERY_LOG_STORE`: where deliveries are recorded, each project's delivery logs (`objects`, the
   * default: webhooks/log.ts), or D1 (`d1`, the store before issue 41, kept to roll back to for the
   * records' retention). Either way D1's records from before are read until their retention passes.
   */
  deliveryLogStore: "d1" | "objects";
  /** `WEBHOOK_RECEIVER_DISABLE_AFTER_HOURS` in ms: a receiver whose every delivery failed this long is disabled. */
  receiverDisableAfterMs: number;
  /**
   * The delivery log's retention after a delivery is created: its body and sealed secret (resend) for
   * `bodiesMs`, its record and attempts for `recordsMs` (≥ `bodiesMs`). Settled deliveries only.
   */
  webhookRetention: { bodiesMs: number; recordsMs: number };
  /** `AUDIT_LOG_RETENTION_DAYS` in ms: an audit entry is deleted this long after it was written. */
  auditRetentionMs: number;
  /** People's sign-in (OpenID Connect); null: the dashboard offers only the operator's admin-token sign-in. */
  oidc: { issuer: string; clientId: string; clientSecret: string } | null;
  /** How long the async-run consumer waits for the app's answer. */
  asyncRunTimeoutMs: number;
  /** Cloudflare for SaaS, or "local" (development: a certificate is reported active at once). */
  certificateProvider: "cloudflare" | "local";
  /** The CA certificates are asked from; CAA records must allow it. */
  certificateAuthority: "lets_encrypt" | "google" | "ssl_com";
  /** Claims (domains in any state) one project may have. */
  maxDomainsPerProject: number;
  /** Apps one project may have (an app is never deleted): each has rows of its own in the project's usage ledger. */
  maxAppsPerProject: number;
  /** `KEEPER_RUNS_MAX`: the waited runs one keeper holds at once; past it a waited run is refused (503). */
  keeperRunsMax: number;
  /** Usage recording: the flush delay of an isolate's records, whether runs are recorded, the ledger's sampling bound. */
  usage: { flushMs: number; recording: boolean; ledgerBytesMax: number };
}

/** `env` as `schema` reads it, or the 500 problem that names the settings at fault (never their values). */
function validated<T>(schema: z.ZodType<T>, env: Env): T {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `${issue.path.join(".") || "config"} ${issue.message}`);
  // The settings' names and what is wrong with them; never their values.
  log("error", "invalid configuration", { problems });
  throw new ApiError("configuration_error", `The service is misconfigured: ${problems.join("; ")}.`);
}

// Parsed once per isolate for each env object: settings only change with a new deployment.
const parsed = new WeakMap<object, Config>();

/**
 * The validated configuration. A missing or malformed setting throws a 500 problem that names the
 * settings at fault (never their values), so an operator sees the cause at the first request.
 */
export function getConfig(env: Env): Config {
  const cached = parsed.get(env);
  if (cached) return cached;
  const c = validated(ConfigSchema, env);
  const config: Config = {
    serviceDomain: c.SERVICE_DOMAIN,
    apiHostnames: new Set(c.API_HOSTNAMES),
    regions: c.REGIONS,
    dnsResolverUrl: c.DNS_RESOLVER_URL,
    adminToken: c.ADMIN_TOKEN,
    jwtSecret: c.JWT_SECRET,
    webhookEncryptionKey: c.WEBHOOK_ENCRYPTION_KEY,
    previous: {
      adminToken: c.ADMIN_TOKEN_PREVIOUS,
      jwtSecret: c.JWT_SECRET_PREVIOUS,
      webhookEncryptionKey: c.WEBHOOK_ENCRYPTION_KEY_PREVIOUS,
    },
    cloudflare:
      c.CF_API_TOKEN && c.CF_ZONE_ID
        ? { apiToken: c.CF_API_TOKEN, zoneId: c.CF_ZONE_ID, apiBaseUrl: c.CF_API_BASE_URL }
        : null,
    allowInsecureTargets: c.ALLOW_INSECURE_TARGETS,
    runTimeoutMs: c.RUN_TIMEOUT_MS,
    runStreamIdleMs: c.RUN_STREAM_IDLE_MS,
    webhookTimeoutMs: c.WEBHOOK_TIMEOUT_MS,
    objectSweeps: c.OBJECT_SWEEPS,
    deliveryLogStore: c.DELIVERY_LOG_STORE,
    receiverDisableAfterMs: c.WEBHOOK_RECEIVER_DISABLE_AFTER_HOURS * 3_600_000,
    webhookRetention: {
      bodiesMs: c.WEBHOOK_BODY_RETENTION_DAYS * 86_400_000,
      recordsMs: c.WEBHOOK_RECORD_RETENTION_DAYS * 86_400_000,
    },
    auditRetentionMs: c.AUDIT_LOG_RETENTION_DAYS * 86_400_000,
    oidc:
      c.OIDC_ISSUER && c.OIDC_CLIENT_ID && c.OIDC_CLIENT_SECRET
        ? { issuer: c.OIDC_ISSUER, clientId: c.OIDC_CLIENT_ID, clientSecret: c.OIDC_CLIENT_SECRET }
        : null,
    asyncRunTimeoutMs: c.ASYNC_RUN_TIMEOUT_MS,
    certificateProvider: c.CERTIFICATE_PROVIDER,
    certificateAuthority: c.CERTIFICATE_AUTHORITY,
    maxDomainsPerProject: c.MAX_DOMAINS_PER_PROJECT,
    maxAppsPerProject: c.MAX_APPS_PER_PROJECT,
    keeperRunsMax: c.KEEPER_RUNS_MAX,
    usage: usageOf(c),
  };
  parsed.set(env, config);
  return config;
}

type UsageConfig = Config["usage"];
const usageOf = (c: z.infer<typeof UsageSettings>): UsageConfig => ({
  flushMs: c.USAGE_FLUSH_MS,
  recording: c.USAGE_RECORDING === "on",
  ledgerBytesMax: c.USAGE_LEDGER_BYTES_MAX,
});
const parsedUsage = new WeakMap<object, UsageConfig>();

/**
 * Usage recording's settings alone, validated as `getConfig` validates them: for the usage ledgers'
 * Durable Object, which needs no other setting. Throws the configuration problem naming a bad one.
 */
export function usageConfigOf(env: Env): UsageConfig {
  const cached = parsedUsage.get(env);
  if (cached) return cached;
  const usage = usageOf(validated(UsageSettings, env));
  parsedUsage.set(env, usage);
  return usage;
}
