import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { expect, vi } from "vitest";
import { env } from "cloudflare:workers";
import type { Client } from "./helpers";
import { seedBuild, seedProject } from "./helpers";
import { PEER } from "./peers";

/** Gives the seeded app a succeeded build whose deployment serves at `originUrl`. */
export async function deploy(
  api: Client,
  seed: { projectId: string; appId: string; token: string },
  originUrl: string,
) {
  const buildId = await seedBuild(api, seed);
  const path = `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${buildId}`;
  await api.json(path, { method: "PATCH", token: seed.token, body: { status: "building" } });
  const done = await api.json(path, {
    method: "PATCH",
    token: seed.token,
    body: { status: "succeeded", origin_url: originUrl },
  });
  if (done.status !== 200) throw new Error(`deploy: ${JSON.stringify(done.body)}`);
  return buildId;
}

let apps = 0;

/**
 * A project with an app (`cortex` unless said) deployed at the peer's echo upstream (or `origin`), and
 * its run path (`…/run`; `appPath` is `/v4/{project_id}/{app_name}`, for other paths).
 */
export async function seedRunnable(
  api: Client,
  origin = `${PEER}/upstream/echo`,
  runtime: "cortex" | "custom" = "cortex",
) {
  const seed = await seedProject(api, { appName: `app-${(apps++).toString(36)}`, runtime });
  await deploy(api, seed, origin);
  const appName = seed.appId.slice(seed.projectId.length + 1);
  return {
    ...seed,
    appName,
    appPath: `/v4/${seed.projectId}/${appName}`,
    runPath: `/v4/${seed.projectId}/${appName}/run`,
  };
}

/** Calls `api.app` with bindings or settings replaced (a shorter timeout, a counting D1, a failing queue). */
export async function callWith(
  api: Client,
  overrides: Partial<Record<keyof Env, unknown>>,
  path: string,
  init: RequestInit & { token?: string; host?: string } = {},
) {
  const headers = new Headers(init.headers);
  if (init.token) headers.set("Authorization", `Bearer ${init.token}`);
  const ctx = createExecutionContext();
  const response = await api.worker.fetch(
    new Request(`http://${init.host ?? "localhost"}${path}`, { ...init, headers }),
    { ...env, ...overrides } as Env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return response;
}

/**
 * What a run hands to the webhook pipeline, kept instead of delivered, for driving the attempts by
 * hand: its lane (where a delivery goes first) and the queue (where it goes when the lane cannot take
 * it) both keep what they get in `sent`. Pass `bindings` to the Worker's env; `queue` alone for a
 * consumer that sends (the async runs' queue).
 */
export function capturingQueue(sent: unknown[] = []) {
  const queue = {
    send: async (body: unknown) => {
      sent.push(body);
    },
    sendBatch: async (messages: Iterable<{ body: unknown }>) => {
      for (const m of messages) sent.push(m.body);
    },
  } as unknown as Queue<unknown>;
  const lanes = lanesThat(async (messages) => {
    sent.push(...messages);
    return { stored: messages.map(() => true) };
  });
  return { queue, lanes, sent, bindings: { WEBHOOK_QUEUE: queue, WEBHOOK_LANES: lanes } };
}

/** A WEBHOOK_LANES binding whose every lane answers `accept` with `accept`. */
export function lanesThat(accept: (messages: unknown[]) => Promise<{ stored: boolean[] }>): Env["WEBHOOK_LANES"] {
  return {
    idFromName: (name: string) => name,
    get: () => ({ accept }),
  } as unknown as Env["WEBHOOK_LANES"];
}

/** A WEBHOOK_LANES binding none of whose lanes can be reached: deliveries go through the queue. */
export const unreachableLanes = () =>
  lanesThat(() => Promise.reject(new Error("Durable Object is overloaded. Requests queued for too long.")));

/** A D1 binding that counts its round trips: each statement run on its own, each batch, each exec. */
export function countingRoundTrips(d1: D1Database) {
  let trips = 0;
  const originals = new WeakMap<object, D1PreparedStatement>();
  const statement = (real: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(real, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== "function") return value;
        if (prop === "bind")
          return (...args: unknown[]) =>
            statement((value as (...a: unknown[]) => D1PreparedStatement).apply(target, args));
        if (prop === "all" || prop === "run" || prop === "raw" || prop === "first") trips++;
        return (value as (...a: unknown[]) => unknown).bind(target);
      },
    });
    originals.set(proxy, real);
    return proxy;
  };
  const db = new Proxy(d1, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop === "prepare") return (query: string) => statement(target.prepare(query));
      if (prop === "exec") trips++;
      if (prop === "batch") {
        return (statements: D1PreparedStatement[]) => {
          trips++;
          return target.batch(statements.map((s) => originals.get(s) ?? s));
        };
      }
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { db, trips: () => trips };
}

/**
 * A rate limiting binding whose budget is spent for `keys` (and any key passed to `spend` later), and
 * is Miniflare's real binding for every other key. The real limiter's windows are aligned to the wall
 * clock: a budget spent on it call by call (6,000 of them) can roll over while a busy machine is still
 * spending it, or before the test's next request. Here the test, not the clock, says when a budget is
 * spent; `src/platform/rate-limit.test.ts` drives the real binding to its configured limit.
 */
export function spentBudget(real: RateLimit | undefined, ...keys: string[]): RateLimit & { spend(key: string): void } {
  if (!real) throw new Error("the rate limiting binding is missing from the test configuration");
  const spent = new Set(keys);
  return {
    spend: (key) => void spent.add(key),
    limit: (options) => (spent.has(options.key) ? Promise.resolve({ success: false }) : real.limit(options)),
  };
}

/** A run of `app` made with `token` (the app's own by default), once its record is in the ledger (the operator reads it); its id. */
export async function recordedRun(
  api: Client,
  app: { projectId: string; runPath: string; token: string },
  token = app.token,
): Promise<string> {
  const res = await api.call(app.runPath, { token });
  await res.text();
  const runId = res.headers.get("x-run-id")!;
  await vi.waitFor(
    async () => expect((await api.call(`/v2/projects/${app.projectId}/runs/${runId}`)).status).toBe(200),
    { timeout: 5_000, interval: 20 },
  );
  return runId;
}
