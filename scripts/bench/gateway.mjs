// The gateway's built bundle and the pass-through baseline, each in its own Miniflare (workerd),
// with local D1 and Queues, seeded through the gateway's own API.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { convertV4MiniflareOptions, Miniflare } from "miniflare";
import { parse } from "smol-toml";
import { floorScript, passthroughScript } from "./passthrough.mjs";

// The local (top-level) configuration of wrangler.toml: the bench runs what `wrangler dev` would.
const config = parse(readFileSync("wrangler.toml", "utf8"));
export const COMPATIBILITY_DATE = config.compatibility_date;

export const SECRETS = {
  ADMIN_TOKEN: "bench-admin-token-0123456789abcdefghijklmnop",
  JWT_SECRET: "bench-jwt-secret-0123456789abcdefghijklmnopq",
  WEBHOOK_ENCRYPTION_KEY: "bench-webhook-key-0123456789abcdefghijklmno",
};

/** `wrangler deploy --dry-run` of the top-level (local) configuration into `outdir`. */
export function buildBundle(outdir) {
  execFileSync("npx", ["wrangler", "deploy", "--dry-run", "--outdir", outdir, "--env", ""], {
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  return join(outdir, "index.js");
}

// Every server's log lines are written (their cost is the Worker's) and dropped, not printed by the bench.
const quiet = { logRequests: false, verbose: false, host: "127.0.0.1", port: 0, handleStructuredLogs: () => undefined };
// Miniflare 5 takes a new options shape; the v4 shape (as its docs and wrangler's own use) converts.
const create = (options) => new Miniflare(convertV4MiniflareOptions(options));

/** One Worker under Miniflare on a free loopback port, quiet: what every server of the bench is. */
export const startWorker = (worker) =>
  create({ ...quiet, workers: [{ modules: true, compatibilityDate: COMPATIBILITY_DATE, ...worker }] });

/**
 * wrangler.toml's rate-limit bindings with a limit no benchmark reaches: each call is made and paid
 * (Miniflare's local stand-in), never answered 429. The gateway, (b') and (f) all bind them.
 */
export const RATE_LIMITS = Object.fromEntries(
  (config.ratelimits ?? []).map((r) => [
    r.name,
    { namespace_id: r.namespace_id, simple: { limit: 1_000_000_000, period: r.simple.period } },
  ]),
);

/** (b), or with `limiter` (b'): the bare pass-through Worker (scripts/bench/passthrough.mjs). */
export async function startPassthrough(upstreamUrl, { limiter = false, readInJs = false } = {}) {
  const started = performance.now();
  const mf = startWorker({
    name: limiter ? "bare-limited" : readInJs ? "bare-js" : "bare",
    script: passthroughScript(upstreamUrl, { limiter, readInJs }),
    ...(limiter ? { ratelimits: { RATE_LIMIT_RUNS: RATE_LIMITS.RATE_LIMIT_RUNS } } : {}),
  });
  const url = await mf.ready;
  return { mf, url: url.origin, startupMs: performance.now() - started };
}

/** Applies `migrations/` in order, as `wrangler d1 migrations apply` would. */
export async function migrate(db) {
  for (const file of readdirSync("migrations")
    .filter((f) => /^\d{4}_.*\.sql$/.test(f))
    .sort()) {
    for (const statement of readFileSync(join("migrations", file), "utf8").split("--> statement-breakpoint")) {
      if (statement.trim()) await db.prepare(statement).run();
    }
  }
}

/** `floorScript` delivering to `receiverUrl`, with its 8 logs (Durable Objects with SQLite) and a queue configured as the webhook queue is in wrangler.toml. */
export async function startFloor(upstreamUrl, receiverUrl) {
  const webhooks = config.queues.consumers.find((c) => c.queue === "webhook-deliveries");
  const mf = startWorker({
    name: "floor",
    script: floorScript(upstreamUrl, receiverUrl),
    durableObjects: { LOG: { className: "FloorLog", useSQLite: true } },
    queueProducers: { QUEUE: { queueName: "floor" } },
    queueConsumers: { floor: { maxBatchSize: webhooks.max_batch_size, maxBatchTimeout: webhooks.max_batch_timeout } },
    ratelimits: { RATE_LIMIT_RUNS: RATE_LIMITS.RATE_LIMIT_RUNS },
  });
  const url = await mf.ready;
  return { mf, url: url.origin };
}

/**
 * The built gateway under Miniflare with the bindings of wrangler.toml, migrated, its rate limiters
 * bound as there with limits no benchmark reaches (RATE_LIMITS). `extraBindings` override settings;
 * `sharedOptions` are Miniflare's own (an inspector port, a log handler); `workerOptions` the
 * worker's (`{ ratelimits: {} }` leaves the limiters unbound: the run then skips them). `migrated`:
 * the storage persisted from an earlier start already has the schema (the soak's restart).
 */
export async function startGateway(
  scriptPath,
  {
    dnsResolverUrl = config.vars.DNS_RESOLVER_URL,
    extraBindings = {},
    sharedOptions = {},
    workerOptions = {},
    migrated = false,
    batchSizes = {},
  } = {},
) {
  const started = performance.now();
  const mf = create({
    ...quiet,
    ...sharedOptions,
    workers: [
      {
        name: "gateway",
        modules: true,
        scriptPath,
        modulesRoot: dirname(scriptPath),
        compatibilityDate: COMPATIBILITY_DATE,
        compatibilityFlags: config.compatibility_flags ?? [],
        bindings: { ...config.vars, DNS_RESOLVER_URL: dnsResolverUrl, ...SECRETS, ...extraBindings },
        d1Databases: { DB: "bench-db" },
        r2Buckets: (config.r2_buckets ?? []).map((b) => b.binding),
        queueProducers: Object.fromEntries(
          (config.queues?.producers ?? []).map((p) => [p.binding, { queueName: p.queue }]),
        ),
        // The webhook lanes (Durable Objects with SQLite storage), as wrangler.toml declares them.
        durableObjects: Object.fromEntries(
          (config.durable_objects?.bindings ?? []).map((b) => [
            b.name,
            {
              className: b.class_name,
              useSQLite: (config.migrations ?? []).some((m) => m.new_sqlite_classes?.includes(b.class_name)),
            },
          ]),
        ),
        ratelimits: RATE_LIMITS,
        ...workerOptions,
        queueConsumers: Object.fromEntries(
          (config.queues?.consumers ?? []).map((c) => [
            c.queue,
            {
              // `batchSizes` (queue → size) gives a consumer larger batches than wrangler.toml, for an experiment.
              maxBatchSize: batchSizes[c.queue] ?? c.max_batch_size,
              maxBatchTimeout: c.max_batch_timeout,
              maxRetries: c.max_retries,
              deadLetterQueue: c.dead_letter_queue,
            },
          ]),
        ),
      },
    ],
  });
  const url = await mf.ready;
  const startupMs = performance.now() - started;
  const db = await mf.getD1Database("DB");
  // A restart on storage kept from before (`sharedOptions.resourcePersistencePath`) is migrated already.
  if (!migrated) await migrate(db);
  return { mf, db, url: url.origin, startupMs };
}

/** Calls the gateway's management API; throws on any non-2xx answer. */
export const managementApi = (gatewayUrl) => async (token, method, path, body) => {
  const response = await fetch(`${gatewayUrl}/v2${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await response.json();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
  return json;
};

/** A project, service account, app and succeeded build whose origin is `upstreamUrl`, made through the API. */
export async function seedRunnableApp(gatewayUrl, upstreamUrl) {
  const call = managementApi(gatewayUrl);
  const admin = SECRETS.ADMIN_TOKEN;
  const { project_id } = await call(admin, "POST", "/projects", { name: "bench" });
  const expires_at = new Date(Date.now() + 24 * 3600 * 1000).toISOString();
  const { token } = await call(admin, "POST", `/projects/${project_id}/service-accounts`, {
    name: "bench",
    expires_at,
  });
  const { app_id } = await call(token, "POST", `/projects/${project_id}/apps`, {
    name: "bench-app",
    region: "us-east-1",
    runtime: "cortex",
  });
  const { build_id } = await call(token, "POST", `/projects/${project_id}/apps/${app_id}/builds`);
  const build = `/projects/${project_id}/apps/${app_id}/builds/${build_id}`;
  await call(token, "PATCH", build, { status: "building" });
  await call(token, "PATCH", build, { status: "succeeded", origin_url: upstreamUrl });
  return { projectId: project_id, token, appName: "bench-app", runPath: `/v4/${project_id}/bench-app/run` };
}

/** A queue's `max_batch_size` as wrangler.toml sets it (the gateway's own, unless `batchSizes` says otherwise). */
export const configuredBatchSize = (queue) => config.queues?.consumers?.find((c) => c.queue === queue)?.max_batch_size;

/** Shards of a project's keepers (src/runs/wait/shard.ts `KEEPER_SHARDS`). */
const KEEPER_SHARDS = 8;

/**
 * Every run with a status URL (of every project, or of `projectId`), as its keeper keeps it
 * (src/runs/async/kept-runs.ts): each project's 8 keepers asked through their RPC (`runs("page")`), the
 * columns named as in SQL. With `withResults`, each finished run's stored result too (`runs("storedResult")`);
 * with `statuses`, only the runs in those states (a page asked for each).
 */
export async function storedRuns(gateway, { withResults = false, projectId, statuses = [undefined] } = {}) {
  const projects =
    projectId === undefined ? (await gateway.db.prepare("SELECT id FROM projects").all()).results : [{ id: projectId }];
  const keepers = await gateway.mf.getDurableObjectNamespace("RUN_KEEPER");
  const rows = [];
  for (const { id: projectId } of projects) {
    for (let shard = 0; shard < KEEPER_SHARDS; shard++) {
      const keeper = keepers.get(keepers.idFromName(`${projectId}:${shard}`));
      const page = [];
      for (const status of statuses)
        page.push(...(await keeper.runs("page", [{ callers: undefined, status, after: undefined, limit: 1e6 }])));
      for (const run of page) {
        const stored = withResults ? await keeper.runs("storedResult", [run.id]) : undefined;
        rows.push({
          id: run.id,
          project_id: run.projectId,
          status: run.status,
          mode: run.mode,
          claimed_by: run.claimedBy,
          error_code: run.errorCode,
          handed_over_at: run.handedOverAt,
          result: stored?.result ?? null,
          result_in_r2: stored?.resultInR2 ?? run.resultInR2,
        });
      }
    }
  }
  return rows;
}

/** Shards of a project's delivery log (src/platform/shards.ts `PROJECT_SHARDS`). */
const LOG_SHARDS = 8;

/**
 * The rows `sql` finds in every store of deliveries, one store's after another: each project's 8
 * delivery logs (src/webhooks/log.ts, asked through their RPC `sql`, where deliveries are recorded by
 * default) and D1 (`DELIVERY_LOG_STORE=d1`, or records from before the logs). A query that aggregates
 * answers once per store.
 */
export async function deliveryRows(gateway, sql, params = []) {
  const projects = (await gateway.db.prepare("SELECT id FROM projects").all()).results;
  const logs = await gateway.mf.getDurableObjectNamespace("DELIVERY_LOG");
  const rows = [];
  for (const { id: projectId } of projects) {
    for (let shard = 0; shard < LOG_SHARDS; shard++) {
      const log = logs.get(logs.idFromName(`${projectId}:${shard}`));
      const answer = await log.sql([{ sql, params }]);
      if ("full" in answer) continue;
      const [{ columns, rows: values }] = answer.answers;
      for (const row of values) rows.push(Object.fromEntries(columns.map((column, i) => [column, row[i]])));
    }
  }
  rows.push(
    ...(
      await gateway.db
        .prepare(sql)
        .bind(...params)
        .all()
    ).results,
  );
  return rows;
}
