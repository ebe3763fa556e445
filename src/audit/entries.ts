import { sql } from "drizzle-orm";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { routePath } from "hono/route";
import type { Principal } from "../auth/principal";
import { type ActorKind, auditLog } from "../db/schema";
import type { AppEnv } from "../platform/scope";
import { newId } from "../platform/ids";
import { log } from "../platform/log";

/** What a management write did, named by the handler that did it. */
export interface AuditEvent {
  /** `noun.verb`, e.g. `build.cancel`; the list in docs/access.md. */
  action: string;
  target: { type: string; id: string };
  /** The project the entry belongs to; the path's `project_id` when absent. */
  projectId?: string;
  /** A few facts worth keeping (granted scopes, a new status); never a secret. */
  details?: Record<string, unknown>;
}

export interface Actor {
  kind: ActorKind;
  id: string;
  name: string | null;
}

export function actorOf(principal: Principal): Actor {
  switch (principal.kind) {
    case "admin":
      return { kind: "operator", id: "operator", name: null };
    case "service_account":
      return { kind: "service_account", id: principal.serviceAccountId, name: principal.name };
    case "user":
      return { kind: "user", id: principal.userId, name: principal.email };
    default: {
      const unknown: never = principal;
      throw new Error(`no audit actor for principal ${JSON.stringify(unknown)}`);
    }
  }
}

const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** Per request: the event its handler named, and whether the handler already wrote it in its own batch. */
const pending = new WeakMap<Request, { event: AuditEvent; written: boolean }>();
/** Per request: entries beyond the write's own (the tokens a member's removal ended), written after a 2xx. */
const consequences = new WeakMap<Request, AuditEvent[]>();

function rowOf(c: Context<AppEnv>, event: AuditEvent) {
  const actor = actorOf(c.get("principal"));
  const at = c.var.scope.deps.now();
  return {
    id: newId("aud", at.getTime()),
    projectId: event.projectId ?? c.req.param("project_id") ?? "",
    actorKind: actor.kind,
    actorId: actor.id,
    actorName: actor.name,
    action: event.action,
    targetType: event.target.type,
    targetId: event.target.id,
    details: event.details ?? null,
    // Cloudflare's edge sets it; absent locally.
    clientIp: c.req.header("cf-connecting-ip") ?? null,
    requestId: c.var.scope.requestId,
    at,
  };
}

/**
 * Names this request's audit entry. `auditWrites` writes it once the handler has answered 2xx, before
 * the response leaves: for writes whose outcome is known only after them (a conditional update, an
 * idempotent repeat, a call to a provider).
 */
export function auditAs(c: Context<AppEnv>, event: AuditEvent) {
  pending.set(c.req.raw, { event, written: false });
}

/**
 * An entry beside the write's own, for what the write did to other things (each token that ended
 * with a removed member): written with it once the handler answered 2xx, with the same request id.
 */
export function auditAlso(c: Context<AppEnv>, event: AuditEvent) {
  const list = consequences.get(c.req.raw) ?? [];
  list.push(event);
  consequences.set(c.req.raw, list);
}

/**
 * The entry as a statement for the handler's own D1 batch, placed right after the write: both commit
 * or neither does, and the entry is inserted only if that write changed a row (`changes()` of the
 * statement before it in the batch), so an `ON CONFLICT DO NOTHING` that did nothing leaves no entry.
 */
export function auditStatement(c: Context<AppEnv>, event: AuditEvent) {
  pending.set(c.req.raw, { event, written: true });
  const r = rowOf(c, event);
  const details = r.details === null ? null : JSON.stringify(r.details);
  // Columns in the table's order (drizzle names them all in `INSERT … SELECT`).
  return c.var.scope.db
    .insert(auditLog)
    .select(
      sql`SELECT ${r.id}, ${r.projectId}, ${r.actorKind}, ${r.actorId}, ${r.actorName}, ${r.action}, ${r.targetType}, ${r.targetId}, ${details}, ${r.clientIp}, ${r.requestId}, ${r.at.getTime()} WHERE changes() > 0`,
    );
}

/** What a log line may say of an entry: its ids and its action, nothing a person or a caller wrote. */
function loggedIds(row: ReturnType<typeof rowOf>) {
  return {
    audit_id: row.id,
    project_id: row.projectId,
    action: row.action,
    actor_kind: row.actorKind,
    actor_id: row.actorId,
    target_type: row.targetType,
    // A path named as a target (a write route that names no action) is the caller's data.
    ...(row.targetType === "path" ? {} : { target_id: row.targetId }),
    at: row.at.toISOString(),
  };
}

// D1 binds at most 100 parameters per statement: 12 per entry, so 8 entries per statement.
const ENTRIES_PER_STATEMENT = 8;

async function append(c: Context<AppEnv>, ...events: AuditEvent[]) {
  const rows = events.map((event) => rowOf(c, event));
  const db = c.var.scope.db;
  const insert = async () => {
    const statements = [];
    for (let i = 0; i < rows.length; i += ENTRIES_PER_STATEMENT)
      statements.push(db.insert(auditLog).values(rows.slice(i, i + ENTRIES_PER_STATEMENT)));
    if (statements.length === 1) await statements[0];
    else await db.batch(statements as [(typeof statements)[number], ...(typeof statements)[number][]]);
  };
  try {
    await insert();
  } catch {
    // The write is done and its answer must not change now (a retried create would create twice): try
    // once more, and if D1 still refuses, each entry's ids go to the logs, never the entry whole: its
    // client address, its actor's and details' emails and a path as target are people's data. With the
    // request id the write itself is found and the entry can be written again.
    try {
      await insert();
    } catch (error) {
      for (const row of rows) log("error", "audit entry not written", { ...loggedIds(row), error });
    }
  }
}

/**
 * Every management write leaves exactly one audit entry: the one its handler wrote in its batch, or
 * the one it named with `auditAs`, written here after a 2xx. A write route that names none still
 * leaves one (the method and route as its action) and a log line that says the route should name it.
 * Beside it, one entry per consequence the handler named with `auditAlso`.
 */
export const auditWrites = createMiddleware<AppEnv>(async (c, next) => {
  await next();
  if (!WRITES.has(c.req.method) || c.res.status < 200 || c.res.status >= 300) return;
  const also = consequences.get(c.req.raw) ?? [];
  const named = pending.get(c.req.raw);
  if (named?.written) return also.length > 0 ? append(c, ...also) : undefined;
  if (named) return append(c, ...also, named.event);
  const route = routePath(c, -1);
  log("warn", "write route names no audit action", { method: c.req.method, route });
  await append(c, { action: `${c.req.method} ${route}`, target: { type: "path", id: c.req.path } });
});
