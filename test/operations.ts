import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { newId } from "../src/platform/ids";
import { startAsync } from "./async-runs";
import { type Client, seedBuild } from "./helpers";
import { person } from "./people";
import { seedRunnable } from "./runs";

const DAY = 24 * 3600 * 1000;
/** An RFC 3339 time `days` after the client's clock. */
export const inDays = (api: Client, days: number) => new Date(api.clock.now().getTime() + days * DAY).toISOString();

let counter = 0;
export const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}${(counter++).toString(36)}`;

export interface Operation {
  method: string;
  template: string;
  /** The scopes its `security` names (empty: any credential of the project). */
  scopes: string[];
  /** Where it is served: the run proxy's operations name their own server (`/v4`); the rest are `/v2`'s. */
  base: string;
  /** The role a member route declares it needs (`x-required-role`), in place of a token scope. */
  role?: string;
}

/** Every operation of the management API's OpenAPI document. */
export async function documentOperations(api: Client): Promise<Operation[]> {
  type Op = { security?: { bearerAuth: string[] }[]; servers?: { url: string }[]; "x-required-role"?: string };
  const spec = (await api.json<{ paths: Record<string, Record<string, Op>> }>("/v2/openapi.json", { token: null }))
    .body;
  return Object.entries(spec.paths).flatMap(([template, methods]) =>
    Object.entries(methods)
      .filter(([method]) => ["get", "post", "put", "patch", "delete"].includes(method))
      .map(([method, op]) => ({
        method,
        template,
        scopes: op.security?.flatMap((s) => s.bearerAuth) ?? [],
        base: op.servers?.[0]?.url ?? "/v2",
        role: op["x-required-role"],
      })),
  );
}

/** A project with one of everything a path of the document can name, and the value of each path parameter. */
export async function projectWithEverything(api: Client) {
  // A custom app: its run path takes every method the document lists (a cortex app only GET and POST).
  const seed = await seedRunnable(api, undefined, "custom");
  const buildId = await seedBuild(api, seed);
  const domain = `${unique("ops")}.example.org`;
  expect(
    (
      await api.json(`/v2/projects/${seed.projectId}/domains`, {
        method: "POST",
        body: { domain, region: "us-east-1" },
      })
    ).status,
  ).toBe(201);
  const victim = await api.json<{ id: string }>(`/v2/projects/${seed.projectId}/service-accounts`, {
    method: "POST",
    body: { name: "victim", expires_at: inDays(api, 5), scopes: ["builds:read"] },
  });
  // People: an owner and a viewer (whose membership the member routes change), someone who has signed
  // in but is no member (to add), and an open invite (to withdraw).
  for (const role of ["owner", "viewer"]) {
    const email = `${unique(role)}@example.test`;
    await api.json(`/v2/projects/${seed.projectId}/invites`, { method: "POST", body: { email, role } });
    await person(api, { email });
  }
  const members = await api.json<{ data: { member_id: string; role: string }[] }>(
    `/v2/projects/${seed.projectId}/members`,
  );
  const outsider = await person(api);
  const invite = await api.json<{ invite_id: string }>(`/v2/projects/${seed.projectId}/invites`, {
    method: "POST",
    body: { email: `${unique("invited")}@example.test`, role: "viewer" },
  });
  // A settled webhook delivery whose body is kept, so it can be resent.
  const deliveryId = newId("whd");
  const at = api.clock.now().getTime();
  await env.DB.prepare(
    "INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count, created_at, updated_at, completed_at, body) VALUES (?, ?, 'run_ops', 'https://example.com/hook', 0, 8, 'delivered', 1, ?, ?, ?, '{\"x\":1}')",
  )
    .bind(deliveryId, seed.projectId, at, at, at)
    .run();
  // A receiver task of that delivery's receiver, so it can be read and cancelled.
  const taskId = newId("wrt");
  await env.DB.prepare(
    "INSERT INTO webhook_receiver_tasks (id, project_id, origin, kind, dry_run, status, since, until, created_by, created_at, updated_at) VALUES (?, ?, 'https://example.com', 'recover', 1, 'counting', ?, ?, 'ops', ?, ?)",
  )
    .bind(taskId, seed.projectId, at - 3_600_000, at, at, at)
    .run();
  // Queued (its queue message is only captured), so it can be read and cancelled.
  const asyncRun = await startAsync(api, seed);
  expect(asyncRun.response.status).toBe(202);
  const values: Record<string, string> = {
    run_id: asyncRun.body.run_id,
    project_id: seed.projectId,
    app_id: seed.appId,
    app_name: seed.appName,
    // The run proxy's `{path}`: the app's own path, called on its origin.
    path: "run",
    build_id: buildId,
    service_account_id: victim.body.id,
    delivery_id: deliveryId,
    // The receiver of that delivery, and its task.
    origin: "https://example.com",
    task_id: taskId,
    domain,
    member_id: members.body.data.find((m) => m.role === "viewer")!.member_id,
    invite_id: invite.body.invite_id,
    // Not a path parameter: the person `POST …/members` adds.
    outsider_email: outsider.email!,
  };
  return { seed, values };
}

/** Whether an operation of the document is the management API's (the others are the run proxy's). */
export const isManagement = (op: Operation) => op.base === "/v2";

/** The path of an operation, with its parameters filled in from `values`. */
export function pathOf({ base, template }: Operation, values: Record<string, string>) {
  return `${base}${template.replace(/\{(\w+)\}/g, (_, name: string) => {
    expect(values[name], `a value for {${name}} in ${template}`).toBeDefined();
    return encodeURIComponent(values[name]!);
  })}`;
}

/** A body each write operation accepts; a new service account gets `scopes` (the default when absent). */
export function writeBody(api: Client, op: Operation, scopes?: string[], values: Record<string, string> = {}): unknown {
  const { method, template } = op;
  if (!isManagement(op)) return method === "post" ? {} : undefined;
  if (template.endsWith("/members/{member_id}")) return method === "patch" ? { role: "developer" } : undefined;
  if (template.endsWith("/members")) return { email: values.outsider_email ?? "nobody@example.test", role: "viewer" };
  if (template.endsWith("/invites")) return { email: `${unique("invitee")}@example.test`, role: "developer" };
  if (template.endsWith("/webhook-settings")) return method === "patch" ? { auto_recover_hours: 1 } : undefined;
  if (template.endsWith("/recover"))
    return { since: new Date(api.clock.now().getTime() - 3_600_000).toISOString(), dry_run: true };
  if (method === "patch") return { status: "building" };
  if (method !== "post") return undefined;
  if (template === "/projects") return { name: unique("project") };
  if (template.endsWith("/apps")) return { name: unique("app"), region: "us-east-1", runtime: "cortex" };
  if (template.endsWith("/domains")) return { domain: `${unique("new")}.example.org`, region: "us-east-1" };
  if (template.endsWith("/service-accounts"))
    return { name: unique("minted"), expires_at: inDays(api, 7), ...(scopes ? { scopes } : {}) };
  return undefined;
}
