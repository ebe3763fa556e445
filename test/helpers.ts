import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { PERMISSIONS } from "../src/auth/permissions";
import { productionDeps } from "../src/deps";
import type { Deps } from "../src/platform/deps";
import { createWorker } from "../src/worker";
import { TEST_SECRETS } from "./secrets";

export const ADMIN = TEST_SECRETS.ADMIN_TOKEN;

/** A clock tests move by hand. */
export function fakeClock(start = "2026-11-21T12:00:00.000Z") {
  let now = new Date(start).getTime();
  return {
    now: () => new Date(now),
    advance(ms: number) {
      now += ms;
    },
    set(iso: string) {
      now = new Date(iso).getTime();
    },
  };
}

export interface CallOptions {
  method?: string;
  token?: string | null;
  body?: unknown;
  rawBody?: BodyInit;
  headers?: Record<string, string>;
  host?: string;
}

/** The real outside world but for what a test replaces (a fake clock, a resolver, an outbound fetch). */
export const testDeps = (deps: Partial<Deps> = {}): Deps => ({ ...productionDeps, ...deps });

/** A client of a gateway built with `deps`; each call waits for the work the request left in waitUntil. */
export function client(deps: Partial<Deps> = {}, bindings: Partial<Env> = {}) {
  const clock = fakeClock();
  const worker = createWorker(testDeps({ now: clock.now, ...deps }));
  // Validation messages the API sends (a domain's first attempt) are kept, not delivered: a test
  // delivers them when it means to, and no check runs behind another test's back.
  const domainQueue: { body: unknown; options?: QueueSendOptions }[] = [];
  const capture = {
    send: async (body: unknown, options?: QueueSendOptions) => void domainQueue.push({ body, options }),
    sendBatch: async (messages: Iterable<MessageSendRequest>) =>
      void domainQueue.push(...[...messages].map((m) => ({ body: m.body }))),
  } as unknown as Queue<unknown>;
  const testEnv = { ...env, DOMAIN_QUEUE: capture, ...bindings };
  async function call(path: string, options: CallOptions = {}) {
    const headers = new Headers(options.headers);
    if (options.token !== null) headers.set("Authorization", `Bearer ${options.token ?? ADMIN}`);
    let body: BodyInit | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      if (!headers.has("Content-Type")) headers.set("Content-Type", "application/json");
    }
    const request = new Request(`http://${options.host ?? "localhost"}${path}`, {
      method: options.method ?? "GET",
      headers,
      body,
    });
    const ctx = createExecutionContext();
    const response = await worker.fetch(request, testEnv, ctx);
    await waitOnExecutionContext(ctx);
    return response;
  }
  async function json<T = Record<string, unknown>>(
    path: string,
    options: CallOptions = {},
  ): Promise<{ status: number; body: T; headers: Headers }> {
    const response = await call(path, options);
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : null) as T, headers: response.headers };
  }
  return { worker, clock, call, json, domainQueue };
}

export type Client = ReturnType<typeof client>;

let counter = 0;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${(counter++).toString(36)}`;

/**
 * Seeds a project with a service account token, an app and (optionally) a build, through the API. The
 * token has every scope, so tests of other things need not think about scopes; scope tests make their own.
 */
export async function seedProject(api: Client, options: { appName?: string; runtime?: "cortex" | "custom" } = {}) {
  const project = await api.json<{ project_id: string }>("/v2/projects", {
    method: "POST",
    body: { name: unique("project") },
  });
  if (project.status !== 201) throw new Error(`seed project: ${JSON.stringify(project.body)}`);
  const projectId = project.body.project_id;
  const expires = new Date(api.clock.now().getTime() + 30 * 24 * 3600 * 1000).toISOString();
  const account = await api.json<{ id: string; token: string }>(`/v2/projects/${projectId}/service-accounts`, {
    method: "POST",
    body: { name: "ci", expires_at: expires, scopes: PERMISSIONS },
  });
  if (account.status !== 201) throw new Error(`seed account: ${JSON.stringify(account.body)}`);
  const app = await api.json<{ app_id: string }>(`/v2/projects/${projectId}/apps`, {
    method: "POST",
    token: account.body.token,
    body: { name: options.appName ?? "hello", region: "us-east-1", runtime: options.runtime ?? "cortex" },
  });
  if (app.status !== 201) throw new Error(`seed app: ${JSON.stringify(app.body)}`);
  return { projectId, token: account.body.token, serviceAccountId: account.body.id, appId: app.body.app_id };
}

export async function seedBuild(api: Client, seed: { projectId: string; appId: string; token: string }) {
  const build = await api.json<{ build_id: string; status: string }>(
    `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds`,
    {
      method: "POST",
      token: seed.token,
    },
  );
  if (build.status !== 201) throw new Error(`seed build: ${JSON.stringify(build.body)}`);
  return build.body.build_id;
}
