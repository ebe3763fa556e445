import { and, eq, sql } from "drizzle-orm";
import { auditAs } from "../audit";
import { webhookProjectSettings, type WebhookReceiverTask, webhookReceiverTasks } from "../db/schema";
import { ApiError, invalidField } from "../platform/errors";
import { rfc3339, rfc3339OrNull } from "../platform/openapi";
import { createRouter } from "../platform/router";
import type { Scope } from "../platform/scope";
import { firstInLogs } from "./log";
import { checkOutboundUrl } from "../platform/url-policy";
import { forgetProjectWebhookSettings, projectWebhookSettings } from "./alerts";
import { ORIGIN } from "./receiver-controls";
import {
  cancelReceiverTask,
  getReceiverTask,
  getWebhookSettings,
  pauseReceiver,
  putWebhookSettings,
  type ReceiverJson,
  type ReceiverTaskJson,
  recoverReceiver,
  resumeReceiver,
} from "./receiver-routes";
import { changeReceiverSettings, type ReceiverSettings, receiverSettings, tellLanes } from "./receiver-settings";
import { cancelTask, createTask, runningTask, startTask, taskProgress } from "./receiver-tasks";
import { sealSecret } from "./secret-box";

/** The receiver named by the path: its origin as the URL parser prints it, known to the project (a delivery went to it, or it has settings), else 404. */
export async function knownReceiver(
  scope: Pick<Scope, "db" | "env" | "config">,
  projectId: string,
  raw: string,
): Promise<string> {
  let origin: string | null = null;
  try {
    const url = new URL(raw);
    if (url.protocol === "https:" || url.protocol === "http:") origin = url.origin;
  } catch {
    // Not an origin: no such receiver.
  }
  const missing = new ApiError(
    "not_found",
    `No webhook receiver '${origin ?? raw}' in project '${projectId}': no delivery of the project went to it.`,
  );
  if (origin === null) throw missing;
  // Its settings (D1), else any delivery to it (its project's logs, then D1: webhooks/log.ts).
  const [settings] = await scope.db.all<{ k: number }>(
    sql`SELECT 1 AS k FROM webhook_receivers WHERE project_id = ${projectId} AND origin = ${origin}`,
  );
  const known =
    settings ??
    (await firstInLogs(scope, projectId, (db) =>
      db.all<{ k: number }>(
        sql`SELECT 1 AS k FROM webhook_deliveries WHERE project_id = ${projectId} AND ${ORIGIN} = ${origin} LIMIT 1`,
      ),
    ));
  if (known === undefined) throw missing;
  return origin;
}

export const receiverJson = (r: ReceiverSettings): ReceiverJson => ({
  origin: r.origin,
  state: r.state,
  state_cause: r.stateCause,
  state_changed_at: rfc3339OrNull(r.stateChangedAt),
  failing_since: rfc3339OrNull(r.failingSince),
});

export async function taskJson(
  scope: Pick<Scope, "db" | "deps" | "config" | "env">,
  task: WebhookReceiverTask,
): Promise<ReceiverTaskJson> {
  const progress = await taskProgress(scope, task.id, task.projectId);
  return {
    task_id: task.id,
    kind: task.kind,
    origin: task.origin,
    status: task.status,
    dry_run: task.dryRun,
    since: rfc3339OrNull(task.since),
    until: rfc3339OrNull(task.until),
    counted: task.counted,
    sent: task.sent,
    ...progress,
    expired: task.expired,
    unsendable: task.unsendable,
    retention_starts_at: rfc3339(new Date(scope.deps.now().getTime() - scope.config.webhookRetention.bodiesMs)),
    created_at: rfc3339(task.createdAt),
    finished_at: rfc3339OrNull(task.finishedAt),
  };
}

async function taskOf(scope: Pick<Scope, "db">, projectId: string, origin: string, taskId: string) {
  const [task] = await scope.db
    .select()
    .from(webhookReceiverTasks)
    .where(
      and(
        eq(webhookReceiverTasks.id, taskId),
        eq(webhookReceiverTasks.projectId, projectId),
        eq(webhookReceiverTasks.origin, origin),
      ),
    );
  if (!task) throw new ApiError("not_found", `No task '${taskId}' of webhook receiver '${origin}'.`);
  return task;
}

/** Starts a recovery of `origin` over [since, until) (a route's, or the automatic recovery's). */
export async function startRecovery(
  scope: Scope,
  projectId: string,
  origin: string,
  window: { since: Date; until: Date; dryRun: boolean },
  createdBy: string,
) {
  const task = await createTask(scope, {
    projectId,
    origin,
    kind: "recover",
    dryRun: window.dryRun,
    since: window.since,
    until: window.until,
    createdBy,
  });
  await startTask(scope.env, task.id);
  return task;
}

const actorId = (principal: { kind: string; serviceAccountId?: string; userId?: string }) =>
  principal.kind === "service_account"
    ? (principal.serviceAccountId ?? "service_account")
    : principal.kind === "user"
      ? (principal.userId ?? "user")
      : "operator";

export const receiverControlsRouter = createRouter()
  .openapi(recoverReceiver, async (c) => {
    const scope = c.var.scope;
    const { project_id, origin: raw } = c.req.valid("param");
    const body = c.req.valid("json");
    const origin = await knownReceiver(scope, project_id, raw);
    const now = scope.deps.now().getTime();
    const since = Date.parse(body.since);
    const until = Math.min(body.until === undefined ? now : Date.parse(body.until), now);
    if (since >= until) throw invalidField("body", "since", "must be before until (and before now)");
    const retention = scope.config.webhookRetention.bodiesMs;
    const retentionStart = now - retention;
    if (until <= retentionStart)
      throw new ApiError(
        "window_past_retention",
        `The window ends before ${new Date(retentionStart).toISOString()}: bodies are kept ${retention / 86_400_000} days, so nothing in it can be sent again.`,
      );
    if (!body.dry_run) {
      const running = await runningTask(scope, project_id, origin, "recover");
      if (running)
        throw new ApiError(
          "conflict",
          `A recovery of '${origin}' is under way: task '${running.id}'. Cancel it or wait for it.`,
        );
    }
    const task = await startRecovery(
      scope,
      project_id,
      origin,
      { since: new Date(since), until: new Date(until), dryRun: body.dry_run },
      actorId(c.get("principal") as never),
    );
    auditAs(c, {
      action: "webhook_receiver.recover",
      target: { type: "webhook_receiver", id: origin },
      details: { task_id: task.id, since: body.since, until: new Date(until).toISOString(), dry_run: body.dry_run },
    });
    return c.json(await taskJson(scope, task), 202);
  })
  .openapi(getReceiverTask, async (c) => {
    const scope = c.var.scope;
    const { project_id, origin: raw, task_id } = c.req.valid("param");
    const origin = await knownReceiver(scope, project_id, raw);
    return c.json(await taskJson(scope, await taskOf(scope, project_id, origin, task_id)), 200);
  })
  .openapi(cancelReceiverTask, async (c) => {
    const scope = c.var.scope;
    const { project_id, origin: raw, task_id } = c.req.valid("param");
    const origin = await knownReceiver(scope, project_id, raw);
    await taskOf(scope, project_id, origin, task_id);
    await cancelTask(scope, task_id);
    auditAs(c, { action: "webhook_receiver.task_cancel", target: { type: "webhook_receiver_task", id: task_id } });
    return c.json(await taskJson(scope, await taskOf(scope, project_id, origin, task_id)), 200);
  })
  .openapi(pauseReceiver, async (c) => {
    const scope = c.var.scope;
    const { project_id, origin: raw } = c.req.valid("param");
    const origin = await knownReceiver(scope, project_id, raw);
    const current = await receiverSettings(scope.db, project_id, origin);
    let settings = current;
    if (current.state === "active")
      settings = (await changeReceiverSettings(scope, project_id, origin, { state: "paused", stateCause: "paused" }))
        .settings;
    // A disabled receiver stays disabled (its cause is the receiver's); pausing it changes nothing. Its
    // lanes are told the state all the same: a pause asked again takes effect at once even when they
    // could not be told the first time.
    else await tellLanes(scope.env, current);
    auditAs(c, { action: "webhook_receiver.pause", target: { type: "webhook_receiver", id: origin } });
    return c.json(receiverJson(settings), 200);
  })
  .openapi(resumeReceiver, async (c) => {
    const scope = c.var.scope;
    const { project_id, origin: raw } = c.req.valid("param");
    const origin = await knownReceiver(scope, project_id, raw);
    const { settings, told } = await changeReceiverSettings(scope, project_id, origin, { state: "active" });
    const task = await createTask(scope, {
      projectId: project_id,
      origin,
      kind: "release",
      dryRun: false,
      since: null,
      until: null,
      createdBy: actorId(c.get("principal") as never),
    });
    // The release need not wait for the lanes' copies of the state to age when they were told (`told`).
    await startTask(scope.env, task.id, { statePushed: told });
    auditAs(c, {
      action: "webhook_receiver.resume",
      target: { type: "webhook_receiver", id: origin },
      details: { task_id: task.id },
    });
    return c.json({ receiver: receiverJson(settings), task: await taskJson(scope, task) }, 200);
  })
  .openapi(getWebhookSettings, async (c) => {
    const { project_id } = c.req.valid("param");
    const settings = await projectWebhookSettings(c.var.scope, project_id, true);
    return c.json(
      {
        alert_endpoint: settings?.alertEndpoint ?? null,
        alert_signed: Boolean(settings?.alertSecret),
        auto_recover_hours: settings?.autoRecoverHours ?? null,
      },
      200,
    );
  })
  .openapi(putWebhookSettings, async (c) => {
    const scope = c.var.scope;
    const { project_id } = c.req.valid("param");
    const body = c.req.valid("json");
    if (body.alert_endpoint) {
      const check = checkOutboundUrl(body.alert_endpoint, { allowInsecure: scope.config.allowInsecureTargets });
      if (!check.ok) throw invalidField("body", "alert_endpoint", check.reason);
    }
    const current = await projectWebhookSettings(scope, project_id, true);
    const alertSecret =
      body.alert_secret === undefined
        ? (current?.alertSecret ?? null)
        : body.alert_secret === null
          ? null
          : JSON.stringify(await sealSecret(scope.config.webhookEncryptionKey, project_id, body.alert_secret));
    const next = {
      projectId: project_id,
      alertEndpoint: body.alert_endpoint === undefined ? (current?.alertEndpoint ?? null) : body.alert_endpoint,
      alertSecret,
      autoRecoverHours:
        body.auto_recover_hours === undefined ? (current?.autoRecoverHours ?? null) : body.auto_recover_hours,
      updatedAt: scope.deps.now(),
    };
    await scope.db
      .insert(webhookProjectSettings)
      .values(next)
      .onConflictDoUpdate({ target: webhookProjectSettings.projectId, set: next });
    forgetProjectWebhookSettings(project_id);
    auditAs(c, {
      action: "webhook_settings.update",
      target: { type: "project", id: project_id },
      details: {
        alert_endpoint: next.alertEndpoint,
        alert_signed: next.alertSecret !== null,
        auto_recover_hours: next.autoRecoverHours,
      },
    });
    return c.json(
      {
        alert_endpoint: next.alertEndpoint,
        alert_signed: next.alertSecret !== null,
        auto_recover_hours: next.autoRecoverHours,
      },
      200,
    );
  });
