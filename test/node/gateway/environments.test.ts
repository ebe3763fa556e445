import { readFileSync } from "node:fs";
import { parse } from "smol-toml";
import { describe, expect, it } from "vitest";

/**
 * wrangler.toml keeps one block per environment because wrangler does not inherit vars and bindings
 * into environments. This proves the blocks agree: every binding, var, queue setting and trigger of
 * the top level (local development and tests) exists, with the same settings, in every environment,
 * and no environment has one the others lack. Only what must differ per deployment may differ.
 */
type Table = Record<string, unknown>;

/** Where an environment is served from: different by design. */
const PER_DEPLOYMENT_KEYS = new Set(["name", "routes", "route", "workers_dev", "account_id"]);
/**
 * Resource ids of one account (`wrangler d1 create` prints a new one per account); values of vars;
 * sampling rates of logs and traces, stated per environment (checked below).
 */
const PER_DEPLOYMENT_FIELDS = new Set(["database_id", "preview_database_id", "id", "preview_id", "head_sampling_rate"]);
/** Keys an environment inherits from the top level when it does not set them (wrangler's docs). */
const INHERITED_KEYS = new Set([
  "main",
  "compatibility_date",
  "compatibility_flags",
  "observability",
  "triggers",
  "limits",
  "placement",
  "minify",
  "rules",
  "build",
  "no_bundle",
  "find_additional_modules",
  "base_dir",
  "preserve_file_names",
  "upload_source_maps",
  "logpush",
  "keep_vars",
  "tsconfig",
  "jsx_factory",
  "jsx_fragment",
  "usage_model",
  "node_compat",
  "first_party_worker",
  "assets",
]);

/** Vars of local development only, which no deployed environment may set (each says why in wrangler.toml). */
// OIDC_CLIENT_SECRET: a var locally only so wrangler dev loads it from .dev.vars; deployed, a secret.
const LOCAL_ONLY_VARS = ["CERTIFICATE_PROVIDER", "OIDC_CLIENT_SECRET"];

const isTable = (value: unknown): value is Table =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** A stable text of a value, without the per-deployment fields of its tables. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (!isTable(value)) return JSON.stringify(value);
  const entries = Object.keys(value)
    .filter((key) => !PER_DEPLOYMENT_FIELDS.has(key))
    .sort()
    .map((key) => `${key}=${canonical(value[key])}`);
  return `{${entries.join(",")}}`;
}

/** What a section configures, one line per binding, var name, queue, setting or trigger. */
function shapeOf(section: Table, top: Table): string[] {
  const lines: string[] = [];
  const keys = new Set([...Object.keys(top), ...Object.keys(section)]);
  for (const key of keys) {
    if (key === "env" || PER_DEPLOYMENT_KEYS.has(key)) continue;
    const value = INHERITED_KEYS.has(key) ? (section[key] ?? top[key]) : section[key];
    if (value === undefined) continue;
    if (key === "vars" && isTable(value)) {
      // Values differ per deployment (hostnames, resolver); the names must not.
      for (const name of Object.keys(value)) lines.push(`vars.${name}`);
    } else if (isTable(value) && Object.values(value).every(Array.isArray)) {
      // `queues = { producers = [...], consumers = [...] }`, `triggers = { crons = [...] }`.
      for (const [sub, items] of Object.entries(value))
        for (const item of items as unknown[]) lines.push(`${key}.${sub}: ${canonical(item)}`);
    } else if (Array.isArray(value)) {
      for (const item of value) lines.push(`${key}: ${canonical(item)}`);
    } else {
      lines.push(`${key}: ${canonical(value)}`);
    }
  }
  return lines.sort();
}

const config = parse(readFileSync("wrangler.toml", "utf8")) as Table;
const environments = Object.entries((config.env ?? {}) as Record<string, Table>);

describe("wrangler.toml environments", () => {
  it("has a staging and a production environment, each routed", () => {
    expect(environments.map(([name]) => name).sort()).toEqual(["production", "staging"]);
    for (const [name, section] of environments) {
      const routes = (section.routes ?? []) as Table[];
      expect(
        routes.some((route) => route.custom_domain === true),
        `${name}: the API hostnames as custom domains`,
      ).toBe(true);
      expect(
        routes.some((route) => route.pattern === "*/*" && typeof route.zone_name === "string"),
        `${name}: the SaaS zone's */* route`,
      ).toBe(true);
      const hostnames = String((section.vars as Table).API_HOSTNAMES).split(",");
      for (const route of routes.filter((r) => r.custom_domain))
        expect(hostnames, `${name}: ${String(route.pattern)}`).toContain(route.pattern);
    }
  });

  it.each(environments)("env.%s configures exactly what the top level does", (_, section) => {
    const expected = shapeOf(config, config).filter((line) => !LOCAL_ONLY_VARS.some((name) => line === `vars.${name}`));
    const actual = shapeOf(section, config);
    expect({
      missing: expected.filter((line) => !actual.includes(line)),
      extra: actual.filter((line) => !expected.includes(line)),
    }).toEqual({
      missing: [],
      extra: [],
    });
  });

  it("logs every request, without the platform's invocation lines or query strings, and samples traces in production and staging", () => {
    const rates: Record<string, number> = {};
    for (const [name, section] of environments) {
      // Stated in the environment itself, not inherited: its rates are its own.
      const observability = section.observability as Table | undefined;
      expect(observability, `env.${name}.observability`).toBeDefined();
      const { logs, traces } = observability as { logs: Table; traces: Table };
      expect(
        { enabled: observability!.enabled, redact_query_string: observability!.redact_query_string },
        name,
      ).toEqual({ enabled: true, redact_query_string: true });
      // Kept in Workers Logs, and sent on to the OTLP destinations the operator names (docs/operations.md).
      expect(logs, name).toEqual({
        enabled: true,
        head_sampling_rate: 1,
        invocation_logs: false,
        persist: true,
        destinations: [],
      });
      expect(traces.enabled, name).toBe(true);
      rates[name] = traces.head_sampling_rate as number;
    }
    expect(rates).toEqual({ production: 0.05, staging: 0.5 });
  });

  it("keeps the local-only vars out of every deployed environment", () => {
    for (const [name, section] of environments) {
      for (const local of LOCAL_ONLY_VARS)
        expect(Object.keys((section.vars ?? {}) as Table), `env.${name}`).not.toContain(local);
    }
  });

  it("notices a binding added to one environment only, and a changed queue setting", () => {
    const top = {
      ...config,
      r2_buckets: [...(config.r2_buckets as Table[]), { binding: "NEW_BUCKET", bucket_name: "new" }],
    };
    const production = (config.env as Record<string, Table>).production!;
    expect(shapeOf(production, top)).not.toEqual(shapeOf(top, top));
    const queues = production.queues as { consumers: Table[]; producers: Table[] };
    const changed = {
      ...production,
      queues: { ...queues, consumers: queues.consumers.map((c, i) => (i === 0 ? { ...c, max_retries: 9 } : c)) },
    };
    expect(shapeOf(changed, config)).not.toEqual(shapeOf(config, config));
    // A database id is per account, so it may differ.
    const otherId = {
      ...production,
      d1_databases: (production.d1_databases as Table[]).map((d) => ({ ...d, database_id: "another" })),
    };
    expect(shapeOf(otherId, config)).toEqual(shapeOf(production, config));
  });
});
