import { and, eq } from "drizzle-orm";
import { auditLog, type AuditEntry } from "../db/schema";
import { createRouter } from "../platform/router";
import { rfc3339 } from "../platform/openapi";
import { listPage } from "../platform/pagination";
import { listAuditLog } from "./routes";

export { auditAlso, auditAs, auditStatement, auditWrites } from "./entries";

export const auditEntryJson = (e: AuditEntry) => ({
  id: e.id,
  project_id: e.projectId,
  actor: { kind: e.actorKind, id: e.actorId, name: e.actorName },
  action: e.action,
  target: { type: e.targetType, id: e.targetId },
  details: e.details,
  client_ip: e.clientIp,
  request_id: e.requestId,
  at: rfc3339(e.at),
});

export const auditRouter = createRouter().openapi(listAuditLog, async (c) => {
  const { project_id } = c.req.valid("param");
  const { limit, cursor, actor, action } = c.req.valid("query");
  const { items, nextCursor } = await listPage(c.var.scope.db, auditLog, {
    filter: and(
      eq(auditLog.projectId, project_id),
      actor === undefined ? undefined : eq(auditLog.actorId, actor),
      action === undefined ? undefined : eq(auditLog.action, action),
    ),
    key: auditLog.id,
    keyOf: (e) => e.id,
    order: "desc",
    limit,
    cursor,
  });
  return c.json({ data: items.map(auditEntryJson), next_cursor: nextCursor }, 200);
});
