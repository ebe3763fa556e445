import { sql } from "drizzle-orm";
import { check, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

// Times are integer milliseconds since the epoch (drizzle maps them to Date); the API renders RFC 3339.
const timestamp = (name: string) => integer(name, { mode: "timestamp_ms" });

export const projects = sqliteTable("projects", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  createdAt: timestamp("created_at").notNull(),
});

export const CREATOR_KINDS = ["user", "service_account", "admin"] as const;
export type CreatorKind = (typeof CREATOR_KINDS)[number];

export const serviceAccounts = sqliteTable(
  "service_accounts",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    // SHA-256 of the token, hex. The token itself is shown once and never stored.
    tokenHash: text("token_hash").notNull(),
    tokenPrefix: text("token_prefix").notNull(),
    // JSON array of permission names (auth/permissions.ts). The column default grants nothing, so a
    // row written without scopes fails closed; the migration gave existing tokens the default set.
    scopes: text("scopes", { mode: "json" })
      .$type<string[]>()
      .notNull()
      .default(sql`'[]'`),
    expiresAt: timestamp("expires_at").notNull(),
    lastUsedAt: timestamp("last_used_at"),
    revokedAt: timestamp("revoked_at"),
    createdAt: timestamp("created_at").notNull(),
    // Who created the token: a token lives no longer than its creator's access (docs/access.md).
    // `admin` for the operator and for every token made before creators were recorded (the migration
    // that added the column filled existing rows with its default): nobody can be shown to have made
    // them, so no member's removal ends them. New rows always name their creator (`createdBy`).
    createdByKind: text("created_by_kind", { enum: CREATOR_KINDS }).notNull().default("admin"),
    // A user's id (`user`), a service account's id (`service_account`), null for the operator.
    createdById: text("created_by_id"),
  },
  (t) => [
    uniqueIndex("service_accounts_token_hash").on(t.tokenHash),
    index("service_accounts_project").on(t.projectId, t.id),
    // The tokens a member or a token created in a project: what removing or revoking the creator ends.
    index("service_accounts_creator").on(t.projectId, t.createdById),
  ],
);

export const RUNTIMES = ["cortex", "custom"] as const;

export const apps = sqliteTable(
  "apps",
  {
    // `{project_id}-{name}`, the form existing clients put in paths.
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    region: text("region").notNull(),
    runtime: text("runtime", { enum: RUNTIMES }).notNull(),
    createdAt: timestamp("created_at").notNull(),
  },
  (t) => [
    uniqueIndex("apps_project_name").on(t.projectId, t.name),
    check("apps_runtime", sql`${t.runtime} in ('cortex', 'custom')`),
  ],
);

export const BUILD_STATUSES = ["queued", "building", "succeeded", "failed", "cancelled"] as const;
export type BuildStatus = (typeof BUILD_STATUSES)[number];

export const builds = sqliteTable(
  "builds",
  {
    id: text("id").primaryKey(),
    appId: text("app_id")
      .notNull()
      .references(() => apps.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    status: text("status", { enum: BUILD_STATUSES }).notNull(),
    originUrl: text("origin_url"),
    error: text("error"),
    createdAt: timestamp("created_at").notNull(),
    updatedAt: timestamp("updated_at").notNull(),
    startedAt: timestamp("started_at"),
    finishedAt: timestamp("finished_at"),
    cancelledAt: timestamp("cancelled_at"),
  },
  (t) => [
    index("builds_app").on(t.appId, t.id),
    // The app's deployment: the newest succeeded build of an app.
    index("builds_app_succeeded")
      .on(t.appId, t.finishedAt)
      .where(sql`${t.status} = 'succeeded'`),
    check("builds_status", sql`${t.status} in ('queued', 'building', 'succeeded', 'failed', 'cancelled')`),
    check("builds_origin_url", sql`${t.status} <> 'succeeded' or ${t.originUrl} is not null`),
  ],
);

export type Project = typeof projects.$inferSelect;
export type ServiceAccount = typeof serviceAccounts.$inferSelect;
export type App = typeof apps.$inferSelect;
export type Build = typeof builds.$inferSelect;

/** Failed-or-pending dashboard sign-in attempts per client IP, in a fixed window (see dashboard/throttle.ts). */
export const signInAttempts = sqliteTable(
  "sign_in_attempts",
  {
    ip: text("ip").primaryKey(),
    attempts: integer("attempts").notNull(),
    windowStartedAt: timestamp("window_started_at").notNull(),
  },
  (t) => [index("sign_in_attempts_window").on(t.windowStartedAt)],
);

/** Signed-in dashboard sessions, so that signing out ends a session even if its cookie was copied. */
export const dashboardSessions = sqliteTable(
  "dashboard_sessions",
  {
    // SHA-256 of the session id: the table alone cannot be turned back into a cookie.
    idHash: text("id_hash").primaryKey(),
    // The signed-in person (`users.id`); null for the operator (admin token).
    userId: text("user_id"),
    expiresAt: timestamp("expires_at").notNull(),
    createdAt: timestamp("created_at").notNull(),
  },
  (t) => [index("dashboard_sessions_expiry").on(t.expiresAt)],
);

/**
 * `held`: stored, not attempted, no attempt counted, because its receiver is paused or disabled
 * (src/webhooks/receiver-controls.ts); resume hands it to its lane as `pending` again.
 */
/**
 * The origin of a delivery's endpoint, in SQL: the scheme and host (and port) before the path's first
 * `/`. Endpoints are stored as the URL parser printed them (lower-case host, no default port, no user
 * info, a path of at least `/`), so this is `new URL(endpoint).origin`. An index is built on it.
 */
export const WEBHOOK_ORIGIN_SQL =
  "substr(endpoint, 1, instr(endpoint, '://') + 1 + instr(substr(endpoint, instr(endpoint, '://') + 3) || '/', '/'))";

export const DELIVERY_STATUSES = ["pending", "held", "delivered", "failed"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One webhook delivery of a run's response: its record from enqueue to the final outcome. */
export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    // `whd_…`: the record's own id. Receivers see `message_id` (the same, except on a resend).
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    runId: text("run_id").notNull(),
    endpoint: text("endpoint").notNull(),
    signed: integer("signed", { mode: "boolean" }).notNull(),
    bodyBytes: integer("body_bytes").notNull(),
    status: text("status", { enum: DELIVERY_STATUSES }).notNull(),
    attemptCount: integer("attempt_count").notNull().default(0),
    lastStatusCode: integer("last_status_code"),
    lastError: text("last_error"),
    createdAt: timestamp("created_at").notNull(),
    updatedAt: timestamp("updated_at").notNull(),
    completedAt: timestamp("completed_at"),
    // Kept for resending until the retention ends (src/webhooks/housekeeping.ts): the body itself when
    // it fits a queue message, else its R2 key; the secret sealed as in the queue message (JSON).
    body: text("body"),
    bodyKey: text("body_key"),
    sealedSecret: text("sealed_secret"),
    bodyPurgedAt: timestamp("body_purged_at"),
    /** The delivery this one resends (`POST …/webhook-deliveries/{id}/resend`). */
    resentFrom: text("resent_from"),
    /**
     * The Standard Webhooks message id: `X-Request-Id` and `webhook-id` of every attempt. A delivery's
     * own id, and a resend's original's, so receivers that de-duplicate by it recognise a resend.
     * Always written; the migration that added it set it to `id` on existing rows (they were sent so).
     */
    messageId: text("message_id"),
    /** The app whose run this delivery copies (usage figures per app count deliveries by it); null on rows from before it was kept. */
    appName: text("app_name"),
    /** The receiver task that sent it (`webhook_receiver_tasks`): a recovery's resend, or a held delivery a resume released. */
    taskId: text("task_id"),
  },
  (t) => [
    index("webhook_deliveries_project").on(t.projectId, t.id),
    // Usage figures and receivers' health read a project's deliveries by time.
    index("webhook_deliveries_project_created").on(t.projectId, t.createdAt),
    index("webhook_deliveries_run").on(t.projectId, t.runId, t.id),
    // The sweeper's and the retention purge's scans.
    index("webhook_deliveries_pending").on(t.status, t.updatedAt),
    index("webhook_deliveries_created").on(t.createdAt),
    // The retention purge's two steps (src/webhooks/retention.ts), each over exactly the rows it may
    // take, oldest first: settled deliveries whose body is kept, and those whose body is gone.
    index("webhook_deliveries_unpurged")
      .on(t.createdAt)
      .where(sql`${t.bodyPurgedAt} is null and ${t.status} in ('delivered', 'failed')`),
    index("webhook_deliveries_expiring")
      .on(t.createdAt)
      .where(sql`${t.bodyPurgedAt} is not null and ${t.status} in ('delivered', 'failed')`),
    // A receiver's deliveries by time (recover, held, the failing span): its origin is
    // `webhookOriginSql`, the expression the queries repeat word for word so SQLite uses this index.
    index("webhook_deliveries_receiver").on(t.projectId, sql.raw(WEBHOOK_ORIGIN_SQL), t.createdAt),
    // Recover's "not delivered since": the other deliveries of the same message (a resend keeps its id).
    index("webhook_deliveries_message").on(t.projectId, t.messageId),
    // A receiver task's progress: its deliveries by status.
    index("webhook_deliveries_task").on(t.taskId, t.status),
    check("webhook_deliveries_status", sql`${t.status} in ('pending', 'held', 'delivered', 'failed')`),
  ],
);

export const ATTEMPT_OUTCOMES = ["delivered", "failed", "retry"] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** Each attempt of a delivery: when, and the receiver's status code or the error class, and how long it took. */
export const webhookAttempts = sqliteTable(
  "webhook_attempts",
  {
    deliveryId: text("delivery_id")
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: "cascade" }),
    attempt: integer("attempt").notNull(),
    at: timestamp("at").notNull(),
    statusCode: integer("status_code"),
    error: text("error"),
    durationMs: integer("duration_ms").notNull(),
    /**
     * What this attempt made of the delivery. A trigger (hand-written in the migration
     * `webhook_delivery_fate`) copies it and the outcome onto the delivery, so recording an attempt
     * is one statement.
     */
    outcome: text("outcome", { enum: ATTEMPT_OUTCOMES }),
  },
  (t) => [primaryKey({ columns: [t.deliveryId, t.attempt] })],
);

export const RECEIVER_STATES = ["active", "paused", "disabled"] as const;
export type ReceiverState = (typeof RECEIVER_STATES)[number];

/**
 * A project's webhook receiver (an origin of its webhook endpoints, one lane each): what its customer
 * chose for it. Control plane: written by the customer's actions (and by a receiver that says stop),
 * never per delivery. No row means the defaults: active, concurrency 6.
 */
export const webhookReceivers = sqliteTable(
  "webhook_receivers",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** The receiver's origin, as `new URL(endpoint).origin` writes it. */
    origin: text("origin").notNull(),
    /** Requests in flight to it at once: 1 (ordered) up to the documented maximum. */
    concurrency: integer("concurrency").notNull().default(6),
    state: text("state", { enum: RECEIVER_STATES }).notNull().default("active"),
    /** Why it is paused or disabled (who paused it, the 410, the header, the failing span). */
    stateCause: text("state_cause"),
    stateChangedAt: timestamp("state_changed_at"),
    /**
     * Since when its deliveries fail: the end of the first delivery that failed after its last delivered
     * one; null once one is delivered. Its lanes write it on each change only (receiver-controls.ts).
     */
    failingSince: timestamp("failing_since"),
    updatedAt: timestamp("updated_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.origin] }),
    check("webhook_receivers_state", sql`${t.state} in ('active', 'paused', 'disabled')`),
    check("webhook_receivers_concurrency", sql`${t.concurrency} >= 1`),
  ],
);

export type WebhookReceiver = typeof webhookReceivers.$inferSelect;

export const RECEIVER_TASK_KINDS = ["recover", "release"] as const;
export type ReceiverTaskKind = (typeof RECEIVER_TASK_KINDS)[number];
export const RECEIVER_TASK_STATUSES = ["counting", "sending", "finished", "cancelled"] as const;
export type ReceiverTaskStatus = (typeof RECEIVER_TASK_STATUSES)[number];

/**
 * A background task on one receiver (src/webhooks/receiver-tasks.ts): a recovery (`recover`: resend
 * what failed in a window) or a release (`release`: hand the held deliveries back to the lane on
 * resume). Its slices advance a cursor stored here, so it survives restarts; what it sent carries its
 * id (`webhook_deliveries.task_id`), which is how delivered and failed are counted.
 */
export const webhookReceiverTasks = sqliteTable(
  "webhook_receiver_tasks",
  {
    // `wrt_…`
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    origin: text("origin").notNull(),
    kind: text("kind", { enum: RECEIVER_TASK_KINDS }).notNull(),
    dryRun: integer("dry_run", { mode: "boolean" }).notNull().default(false),
    status: text("status", { enum: RECEIVER_TASK_STATUSES }).notNull(),
    /** The window of a recovery, by the deliveries' creation; `until` is fixed when the task is made. */
    since: timestamp("since"),
    until: timestamp("until"),
    counted: integer("counted").notNull().default(0),
    sent: integer("sent").notNull().default(0),
    /** Failed deliveries of the window whose body is no longer kept (past the retention), not sent. */
    expired: integer("expired").notNull().default(0),
    /** Failed deliveries with no body ever stored (`run_interrupted`, `enqueue_failed`, …), not sent. */
    unsendable: integer("unsendable").notNull().default(0),
    /** Where the current pass stands: the last delivery it took, by (created_at, id). */
    cursorAt: integer("cursor_at"),
    cursorId: text("cursor_id"),
    /** Who asked (an actor id) or what (`auto-recovery`, `resume`). */
    createdBy: text("created_by").notNull(),
    createdAt: timestamp("created_at").notNull(),
    updatedAt: timestamp("updated_at").notNull(),
    finishedAt: timestamp("finished_at"),
  },
  (t) => [
    index("webhook_receiver_tasks_receiver").on(t.projectId, t.origin, t.status),
    check("webhook_receiver_tasks_kind", sql`${t.kind} in ('recover', 'release')`),
    check("webhook_receiver_tasks_status", sql`${t.status} in ('counting', 'sending', 'finished', 'cancelled')`),
  ],
);

export type WebhookReceiverTask = typeof webhookReceiverTasks.$inferSelect;

/**
 * A project's webhook settings beside its receivers' (src/webhooks/alerts.ts): the alert endpoint that
 * receives signed events about its receivers, and the opt-in automatic recovery. No row: no alerts,
 * no automatic recovery.
 */
export const webhookProjectSettings = sqliteTable("webhook_project_settings", {
  projectId: text("project_id")
    .primaryKey()
    .references(() => projects.id, { onDelete: "cascade" }),
  alertEndpoint: text("alert_endpoint"),
  /** The alert endpoint's signing secret, sealed as a delivery's (AES-256-GCM, bound to the project id). */
  alertSecret: text("alert_secret"),
  /** Automatic recovery: a failing receiver that answers 2xx again gets its failed deliveries of the last this many hours recovered. Null: off. */
  autoRecoverHours: integer("auto_recover_hours"),
  updatedAt: timestamp("updated_at").notNull(),
});

export type WebhookProjectSettings = typeof webhookProjectSettings.$inferSelect;

export type WebhookDelivery = typeof webhookDeliveries.$inferSelect;
export type WebhookAttempt = typeof webhookAttempts.$inferSelect;

export const DOMAIN_STATUSES = ["pending", "validated", "failed"] as const;
export type DomainStatus = (typeof DOMAIN_STATUSES)[number];
export const CERTIFICATE_STATUSES = ["none", "pending", "active", "failed"] as const;
export type CertificateStatus = (typeof CERTIFICATE_STATUSES)[number];
/** The stable codes of a domain's `last_error`: clients switch on them, people read the message. */
export const DOMAIN_ERROR_CODES = [
  "WRONG_TARGET",
  "CONFLICTING_RECORDS",
  "NO_RECORD",
  "DNS_UNAVAILABLE",
  "OWNERSHIP_PROOF_REQUIRED",
  "OWNERSHIP_MOVED",
  "CAA_BLOCKS_CERTIFICATE",
] as const;
export type DomainErrorCode = (typeof DOMAIN_ERROR_CODES)[number];

export const domains = sqliteTable(
  "domains",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    // Normalised: lower case, ASCII (punycode), no trailing dot. Several projects may claim a hostname;
    // only a validated claim holds it (docs/domains.md, Ownership).
    hostname: text("hostname").notNull(),
    region: text("region").notNull(),
    // An apex cannot hold a CNAME; it is told to use an ALIAS/flattened record and validated by addresses.
    apex: integer("apex", { mode: "boolean" }).notNull(),
    status: text("status", { enum: DOMAIN_STATUSES }).notNull(),
    lastErrorCode: text("last_error_code", { enum: DOMAIN_ERROR_CODES }),
    lastErrorMessage: text("last_error_message"),
    lastCheckedAt: timestamp("last_checked_at"),
    // When the cron may next claim it; the claim moves it forward, so overlapping runs skip it.
    nextCheckAt: timestamp("next_check_at").notNull(),
    autoValidationEndsAt: timestamp("auto_validation_ends_at").notNull(),
    validatedAt: timestamp("validated_at"),
    certificateStatus: text("certificate_status", { enum: CERTIFICATE_STATUSES }).notNull(),
    // The provider's id for the certificate (a Cloudflare custom hostname id); null until provisioned.
    certificateRef: text("certificate_ref"),
    certificateCheckedAt: timestamp("certificate_checked_at"),
    // An HTTP validation token the provider asked us to serve under /.well-known/, if any.
    challengePath: text("challenge_path"),
    challengeBody: text("challenge_body"),
    // The value of the TXT record `_gateway-challenge.{hostname}` that proves control of a contested
    // hostname: random per claim, so one project's proof never validates another's claim.
    ownershipValue: text("ownership_value").notNull(),
    createdAt: timestamp("created_at").notNull(),
    updatedAt: timestamp("updated_at").notNull(),
  },
  (t) => [
    index("domains_hostname").on(t.hostname),
    // One validated claim per hostname: the database itself refuses a second holder.
    uniqueIndex("domains_hostname_holder")
      .on(t.hostname)
      .where(sql`${t.status} = 'validated'`),
    uniqueIndex("domains_project").on(t.projectId, t.hostname),
    index("domains_due")
      .on(t.nextCheckAt)
      .where(sql`${t.status} = 'pending'`),
    index("domains_unvalidated")
      .on(t.autoValidationEndsAt)
      .where(sql`${t.status} <> 'validated'`),
    index("domains_certificates")
      .on(t.certificateCheckedAt)
      .where(sql`${t.certificateStatus} = 'pending'`),
    check("domains_status", sql`${t.status} in ('pending', 'validated', 'failed')`),
    check("domains_certificate_status", sql`${t.certificateStatus} in ('none', 'pending', 'active', 'failed')`),
  ],
);

export type Domain = typeof domains.$inferSelect;

export const ASYNC_RUN_STATUSES = ["queued", "running", "succeeded", "failed", "cancelled"] as const;
export type AsyncRunStatus = (typeof ASYNC_RUN_STATUSES)[number];
/** The modes of a run that has a status URL (`async_runs.mode`): a synchronous run has none. */
export const STATUS_URL_MODES = ["async", "wait"] as const;
/** How an async run's request body is stored as text (`request_body_encoding`). */
export const REQUEST_BODY_ENCODINGS = ["utf8", "base64"] as const;
export type RequestBodyEncoding = (typeof REQUEST_BODY_ENCODINGS)[number];

/**
 * A run accepted with `?async=true` (src/runs/async/): its request until it is claimed, its state, and
 * its answer (the exact bytes a synchronous run would have answered) until the retention purge.
 */
export const asyncRuns = sqliteTable(
  "async_runs",
  {
    // `run_…`: also the `X-Run-Id` the app sees and the webhook's `run_id`.
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    appName: text("app_name").notNull(),
    status: text("status", { enum: ASYNC_RUN_STATUSES }).notNull(),
    // The app request as the app will get it, fixed when the run was accepted.
    method: text("method").notNull(),
    // The app's URL (`{origin_url}/{path}?query`); its SQL column keeps the name it was stored under.
    appUrl: text("target").notNull(),
    // The app's path the run calls (`run`, `v1/chat/completions`: `RunTarget.appPath`, no query), kept at
    // acceptance. `null` on rows from before this column: their path is read back from `appUrl`.
    appPath: text("app_path"),
    requestHeaders: text("request_headers").notNull(),
    // The caller's body: here when small, in R2 (`requestInR2`) when large; cleared once the run ends.
    requestBody: text("request_body"),
    requestInR2: integer("request_in_r2", { mode: "boolean" }).notNull().default(false),
    // How the body is stored as text: `utf8` (its own text) or `base64` (any other bytes, a custom app's
    // binary upload); rows from before this column read as `utf8`.
    requestBodyEncoding: text("request_body_encoding", { enum: REQUEST_BODY_ENCODINGS }).notNull().default("utf8"),
    // The accepting request's id: problem bodies of the run carry it, as a synchronous run's would.
    requestId: text("request_id").notNull(),
    idempotencyKey: text("idempotency_key"),
    // SHA-256 of what the key stands for (method, app, query, webhook, body): a different request with the same key is a 422.
    requestHash: text("request_hash").notNull(),
    webhookEndpoint: text("webhook_endpoint"),
    // Sealed (secret-box), never in clear; cleared once the delivery has it.
    webhookSecret: text("webhook_secret"),
    // The webhook delivery of the result once handed to the pipeline (`none`: there will be none).
    deliveryId: text("delivery_id"),
    // The queue message that claimed the run: a redelivery of that same message means its consumer died.
    claimedBy: text("claimed_by"),
    resultStatus: integer("result_status"),
    resultType: text("result_type"),
    resultBytes: integer("result_bytes"),
    result: text("result"),
    resultInR2: integer("result_in_r2", { mode: "boolean" }).notNull().default(false),
    errorCode: text("error_code"),
    errorMessage: text("error_message"),
    // The principal that made the run: `sa:<service_account_id>`, `jwt:<sub>` (`jwt:` + project for a
    // JWT without `sub`), `user:<user_id>` or `admin`. Only that caller reads, cancels or re-uses its
    // Idempotency-Key. '' on runs made before callers were recorded.
    caller: text("caller").notNull().default(""),
    createdAt: timestamp("created_at").notNull(),
    startedAt: timestamp("started_at"),
    finishedAt: timestamp("finished_at"),
    // How the run was asked for: `async` (`?async=true`), or `wait` (`Prefer: wait`, handed over to its
    // keeper when the app had not answered in time; src/runs/wait/): its row is written at hand-over.
    mode: text("mode", { enum: STATUS_URL_MODES }).notNull().default("async"),
    // When a waited run's caller stopped waiting (202, or hung up): the hand-over to its keeper.
    handedOverAt: timestamp("handed_over_at"),
    // The run's `Cancel-After`, counted from acceptance: past it the app is not called, or its call is ended.
    deadlineAt: timestamp("deadline_at"),
    // Set by the first stream that follows the run (src/runs/async/stream.ts), before it reads the state:
    // an owner's conditional write returns it, and only then does the owner tell the run's followers.
    followed: integer("followed", { mode: "boolean" }).notNull().default(false),
    // The admitted run (src/runs/admitted.ts, JSON, its webhook secret in `webhook_secret`): what the
    // consumer executes, as admitted (its runtime, limits, deadline). Forgotten with the request when the
    // run ends. `null` on rows from before it, and on a waited run's row (its keeper holds the run).
    admitted: text("admitted"),
  },
  (t) => [
    index("async_runs_project").on(t.projectId, t.id),
    uniqueIndex("async_runs_idempotency")
      .on(t.projectId, t.caller, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
    // The cron's sweeps: runs left running or queued too long, finished runs past retention.
    index("async_runs_open")
      .on(t.status, t.createdAt)
      .where(sql`${t.status} in ('queued', 'running')`),
    index("async_runs_finished")
      .on(t.finishedAt)
      .where(sql`${t.finishedAt} is not null`),
    // Keys past their 24 hours, freed in slices oldest first (src/runs/async/store.ts, `releaseKeys`).
    index("async_runs_keyed")
      .on(t.createdAt)
      .where(sql`${t.idempotencyKey} is not null`),
    // Finished runs whose result was not handed to the webhook pipeline (their consumer died in between).
    index("async_runs_undelivered")
      .on(t.finishedAt)
      .where(
        sql`${t.webhookEndpoint} is not null and ${t.deliveryId} is null and ${t.status} in ('succeeded', 'failed')`,
      ),
    check("async_runs_status", sql`${t.status} in ('queued', 'running', 'succeeded', 'failed', 'cancelled')`),
  ],
);

export type AsyncRun = typeof asyncRuns.$inferSelect;
/**
 * Hostnames a project held validated and gave up (removed the domain): for 30 days another project's
 * claim on them is contested, so a CNAME left dangling cannot be taken over (docs/domains.md, Ownership).
 */
export const domainReleases = sqliteTable(
  "domain_releases",
  {
    hostname: text("hostname").notNull(),
    projectId: text("project_id").notNull(),
    releasedAt: timestamp("released_at").notNull(),
  },
  (t) => [index("domain_releases_hostname").on(t.hostname, t.releasedAt)],
);

export const ACTOR_KINDS = ["operator", "service_account", "user"] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

/**
 * The audit log: one row per management write, appended and never changed (no code updates it). Read
 * newest first per project, optionally by actor or action, hence the three indexes.
 */
export const auditLog = sqliteTable(
  "audit_log",
  {
    // `aud_…`: sorts by time, so the id is the list's cursor.
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    actorKind: text("actor_kind", { enum: ACTOR_KINDS }).notNull(),
    // `sa_…`, a user's id, or `operator`.
    actorId: text("actor_id").notNull(),
    // The actor's name at the time (a service account's name, a person's email), for people to read.
    actorName: text("actor_name"),
    action: text("action").notNull(),
    targetType: text("target_type").notNull(),
    targetId: text("target_id").notNull(),
    // A few facts of the write (granted scopes, a build's new status); never a secret.
    details: text("details", { mode: "json" }).$type<Record<string, unknown>>(),
    clientIp: text("client_ip"),
    requestId: text("request_id").notNull(),
    at: timestamp("at").notNull(),
  },
  (t) => [
    index("audit_log_project").on(t.projectId, t.id),
    index("audit_log_actor").on(t.projectId, t.actorId, t.id),
    index("audit_log_action").on(t.projectId, t.action, t.id),
    check("audit_log_actor_kind", sql`${t.actorKind} in ('operator', 'service_account', 'user')`),
  ],
);

export type AuditEntry = typeof auditLog.$inferSelect;

/** People who signed in with OpenID Connect, known by their provider's (issuer, subject). */
export const users = sqliteTable(
  "users",
  {
    id: text("id").primaryKey(),
    issuer: text("issuer").notNull(),
    subject: text("subject").notNull(),
    // As the provider last said; lower case. Invites match it only while `email_verified` is true.
    email: text("email"),
    emailVerified: integer("email_verified", { mode: "boolean" }).notNull(),
    name: text("name"),
    createdAt: timestamp("created_at").notNull(),
    lastSignInAt: timestamp("last_sign_in_at").notNull(),
  },
  (t) => [uniqueIndex("users_identity").on(t.issuer, t.subject)],
);

export const ROLES = ["owner", "developer", "viewer"] as const;
export type Role = (typeof ROLES)[number];

export const projectMembers = sqliteTable(
  "project_members",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    role: text("role", { enum: ROLES }).notNull(),
    createdAt: timestamp("created_at").notNull(),
    updatedAt: timestamp("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("project_members_project_user").on(t.projectId, t.userId),
    index("project_members_user").on(t.userId, t.projectId),
    check("project_members_role", sql`${t.role} in ('owner', 'developer', 'viewer')`),
  ],
);

/** An invitation by email, claimed at sign-in by a user whose verified email it is. */
export const projectInvites = sqliteTable(
  "project_invites",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    email: text("email").notNull(),
    role: text("role", { enum: ROLES }).notNull(),
    createdAt: timestamp("created_at").notNull(),
    expiresAt: timestamp("expires_at").notNull(),
  },
  (t) => [
    uniqueIndex("project_invites_project_email").on(t.projectId, t.email),
    index("project_invites_email").on(t.email),
    check("project_invites_role", sql`${t.role} in ('owner', 'developer', 'viewer')`),
  ],
);

/** OpenID Connect sign-ins under way: state, nonce and PKCE verifier, used once by the callback. */
export const signInRequests = sqliteTable(
  "sign_in_requests",
  {
    // SHA-256 of the random handle in the browser's short-lived sign-in cookie.
    handleHash: text("handle_hash").primaryKey(),
    state: text("state").notNull(),
    nonce: text("nonce").notNull(),
    codeVerifier: text("code_verifier").notNull(),
    next: text("next").notNull(),
    expiresAt: timestamp("expires_at").notNull(),
  },
  (t) => [index("sign_in_requests_expiry").on(t.expiresAt)],
);

export type User = typeof users.$inferSelect;
export type ProjectMember = typeof projectMembers.$inferSelect;
export type ProjectInvite = typeof projectInvites.$inferSelect;
