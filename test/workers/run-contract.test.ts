import { Validator, type Schema } from "@cfworker/json-schema";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { RUN_ID_EXAMPLE } from "../../src/runs/async/routes";
import { consume, startAsync } from "../async-runs";
import { world as domainsWorld } from "../cron-world";
import { addDomain, uniqueLabel, validate } from "../domains";
import { faultyD1 } from "../faulty-d1";
import { type Client, seedProject } from "../helpers";
import { DOWN, PEER } from "../peers";
import { callWith, capturingQueue, seedRunnable, spentBudget } from "../runs";

/**
 * The run operations' contract, walked answer by answer: each answer a run operation can give is
 * provoked for real (in workerd, against the peers the other tests use) and held to the OpenAPI
 * document the gateway serves: its status must be listed for that operation, its content type, its
 * body (against the listed schema) and its headers must be what the document says. And every status
 * the document lists for a run operation is provoked here, so the document promises nothing untried.
 */

type Method = "get" | "post" | "put" | "patch" | "delete" | "head";
const RUN = "/{project_id}/{app_name}/{path}";
const ASYNC = "/{project_id}/{app_name}/runs/{run_id}";
/** Headers a client acts on: present on an answer, they must be documented for it. */
const CONTRACT_HEADERS = [
  "x-request-id",
  "x-run-id",
  "www-authenticate",
  "retry-after",
  "allow",
  "location",
  "ratelimit",
  "ratelimit-policy",
  "preference-applied",
];

interface Case {
  path: typeof RUN | typeof ASYNC;
  method: Method;
  status: number;
  why: string;
  send: () => Promise<Response>;
  /** Headers this answer must carry (besides what the document requires). */
  carries?: string[];
  /** The gateway's own problem (not the app's answer): `application/problem+json`. */
  problem?: boolean;
}

type Json = Record<string, unknown>;
let document: Json;

/** `schema` with every `$ref` to the document's components replaced by the component itself. */
function inline(schema: unknown, seen: string[] = []): unknown {
  if (Array.isArray(schema)) return schema.map((item) => inline(item, seen));
  if (schema === null || typeof schema !== "object") return schema;
  const ref = (schema as Json).$ref;
  if (typeof ref === "string") {
    if (seen.includes(ref)) throw new Error(`a cycle through ${ref}`);
    const target = ref
      .replace(/^#\//, "")
      .split("/")
      .reduce<unknown>((node, key) => (node as Json)[key], document);
    return inline(target, [...seen, ref]);
  }
  return Object.fromEntries(Object.entries(schema as Json).map(([key, value]) => [key, inline(value, seen)]));
}

const mediaType = (header: string | null) => (header ?? "").split(";")[0]!.trim().toLowerCase();

/** What the document says of this answer, and every way the answer departs from it. */
async function departures(path: string, method: Method, response: Response): Promise<string[]> {
  const operation = ((document.paths as Json)[path] as Json | undefined)?.[method] as Json | undefined;
  if (!operation) return [`${method.toUpperCase()} ${path} is not in the document`];
  const responses = operation.responses as Json;
  const status = String(response.status);
  const listed = (responses[status] ?? responses[`${status[0]}XX`]) as Json | undefined;
  if (!listed) return [`${response.status} is not listed for ${operation.operationId as string}`];
  const out: string[] = [];
  const headers = Object.fromEntries(
    Object.entries((listed.headers ?? {}) as Json).map(([name, value]) => [name.toLowerCase(), value as Json]),
  );
  for (const [name, definition] of Object.entries(headers)) {
    if (definition.required && !response.headers.has(name)) out.push(`header ${name} is required and missing`);
  }
  for (const name of CONTRACT_HEADERS)
    if (response.headers.has(name) && !headers[name]) out.push(`header ${name} is sent but not documented`);
  const body = method === "head" || response.status === 101 ? "" : await response.text();
  const content = listed.content as Json | undefined;
  if (!content) {
    if (body !== "") out.push(`a body, where the document lists none`);
    return out;
  }
  if (body === "" && response.status === 101) return out;
  const type = mediaType(response.headers.get("content-type"));
  const key = [type, `${type.split("/")[0]}/*`, "*/*"].find((candidate) => candidate in content);
  if (!key) return [...out, `content type ${type || "(none)"} is not listed (${Object.keys(content).join(", ")})`];
  if (method === "head") return out;
  if (/^application\/(.+\+)?json$/.test(key)) {
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch {
      return [...out, `a ${key} body that is not JSON: ${body.slice(0, 80)}`];
    }
    const schema = inline((content[key] as Json).schema) as Schema;
    const result = new Validator(schema, "2020-12", false).validate(value);
    for (const error of result.errors) out.push(`body: ${error.instanceLocation} ${error.error}`);
  }
  return out;
}

const cases: Case[] = [];
const add = (c: Case) => cases.push(c);
const ALL: Method[] = ["get", "post", "put", "patch", "delete"];
const WITH_BODY = new Set<Method>(["post", "put", "patch", "delete"]);
const upper = (m: Method) => m.toUpperCase();

interface World {
  api: Client;
  cortex: Awaited<ReturnType<typeof seedRunnable>>;
  custom: Awaited<ReturnType<typeof seedRunnable>>;
  /** Run keys never used before each use: nothing of them is cached in this isolate. */
  freshToken: (projectId: string, scopes?: string[]) => Promise<string>;
  /** A validated custom domain of each app's project. */
  domains: { cortex: string; custom: string };
  /** An app of a project whose run budget is spent. */
  limited: Awaited<ReturnType<typeof seedRunnable>>;
  /** The run budget every request of this file sees: the limited project's is spent, the others' are Miniflare's. */
  runs: RateLimit;
}
let world: World;

/** The app a method runs on: a `cortex` app takes GET and POST, a `custom` app every run method. */
const appFor = (method: Method, w: World) => (method === "get" || method === "post" ? w.cortex : w.custom);
const bodyFor = (method: Method) =>
  WITH_BODY.has(method) ? { body: "{}", headers: { "Content-Type": "application/json" } } : {};

function run(
  method: Method,
  path: string,
  init: {
    token?: string | null;
    query?: string;
    headers?: Record<string, string>;
    body?: BodyInit;
    bindings?: Record<string, unknown>;
    host?: string;
  } = {},
) {
  const headers = new Headers(init.headers);
  if (init.token) headers.set("Authorization", `Bearer ${init.token}`);
  const url = init.query ? `${path}?${init.query}` : path;
  // The limited project's run budget stays spent for the whole file, whatever the wall clock does.
  const bindings = { RATE_LIMIT_RUNS: world.runs, ...init.bindings };
  return callWith(world.api, bindings, url, { method: upper(method), headers, body: init.body, host: init.host });
}

// The any-path run, per method.
for (const method of ALL) {
  const at = (w: World) => appFor(method, w);
  add({
    path: RUN,
    method,
    status: 200,
    why: "a run",
    send: () => run(method, at(world).runPath, { token: at(world).token, ...bodyFor(method) }),
    carries: ["x-run-id"],
  });
  add({
    path: RUN,
    method,
    status: 202,
    why: "an async run",
    send: () =>
      run(method, at(world).runPath, {
        token: at(world).token,
        query: "async=true",
        bindings: { ASYNC_RUN_QUEUE: capturingQueue().queue },
        ...bodyFor(method),
      }),
    carries: ["location", "x-run-id"],
  });
  add({
    path: RUN,
    method,
    status: 400,
    problem: true,
    why: "a webhookEndpoint that is not https",
    send: () =>
      run(method, at(world).runPath, {
        token: at(world).token,
        query: "webhookEndpoint=ftp%3A%2F%2Fexample.com",
        ...bodyFor(method),
      }),
  });
  add({
    path: RUN,
    method,
    status: 401,
    problem: true,
    why: "no key",
    send: () => run(method, at(world).runPath, {}),
    carries: ["www-authenticate"],
  });
  add({
    path: RUN,
    method,
    status: 403,
    problem: true,
    why: "a key without runs:invoke",
    send: async () =>
      run(method, at(world).runPath, {
        token: await world.freshToken(at(world).projectId, ["builds:read"]),
        ...bodyFor(method),
      }),
    carries: ["www-authenticate"],
  });
  add({
    path: RUN,
    method,
    status: 404,
    problem: true,
    why: "no such app",
    send: () =>
      run(method, `/v4/${at(world).projectId}/no-such-app/run`, { token: at(world).token, ...bodyFor(method) }),
  });
  add({
    path: RUN,
    method,
    status: 409,
    problem: true,
    why: "an app with no ready deployment",
    send: async () => {
      const seed = await seedProject(world.api, {
        appName: "undeployed",
        runtime: method === "get" || method === "post" ? "cortex" : "custom",
      });
      return run(method, `/v4/${seed.projectId}/undeployed/run`, { token: seed.token, ...bodyFor(method) });
    },
  });
  add({
    path: RUN,
    method,
    status: 422,
    problem: true,
    why: "an Idempotency-Key reused for another request",
    send: async () => {
      const app = at(world);
      const key = `contract-${method}-${Math.random().toString(36).slice(2)}`;
      const queue = { ASYNC_RUN_QUEUE: capturingQueue().queue };
      const first = await run(method, app.runPath, {
        token: app.token,
        query: "async=true&n=1",
        headers: { "Idempotency-Key": key, ...bodyFor(method).headers },
        body: bodyFor(method).body,
        bindings: queue,
      });
      expect(first.status).toBe(202);
      return run(method, app.runPath, {
        token: app.token,
        query: "async=true&n=2",
        headers: { "Idempotency-Key": key, ...bodyFor(method).headers },
        body: bodyFor(method).body,
        bindings: queue,
      });
    },
  });
  add({
    path: RUN,
    method,
    status: 429,
    problem: true,
    why: "the project's run budget spent",
    send: () => run(method, world.limited.runPath, { token: world.limited.token, ...bodyFor(method) }),
    carries: ["retry-after", "ratelimit", "ratelimit-policy"],
  });
  add({
    path: RUN,
    method,
    status: 500,
    problem: true,
    why: "a malformed setting",
    send: () =>
      run(method, at(world).runPath, { token: at(world).token, bindings: { JWT_SECRET: "short" }, ...bodyFor(method) }),
  });
  add({
    path: RUN,
    method,
    status: 502,
    problem: true,
    why: "an app that does not answer",
    send: () =>
      run(method, (method === "get" || method === "post" ? down.cortex : down.custom).runPath, {
        token: (method === "get" || method === "post" ? down.cortex : down.custom).token,
        ...bodyFor(method),
      }),
    carries: ["x-run-id"],
  });
  add({
    path: RUN,
    method,
    status: 503,
    problem: true,
    why: "D1 unavailable",
    send: async () =>
      run(method, at(world).runPath, {
        token: await world.freshToken(at(world).projectId),
        bindings: { DB: unavailableD1() },
        ...bodyFor(method),
      }),
    carries: ["retry-after"],
  });
  add({
    path: RUN,
    method,
    status: 504,
    problem: true,
    why: "an app slower than RUN_TIMEOUT_MS",
    send: () =>
      run(method, at(world).runPath, {
        token: at(world).token,
        query: "delay=400",
        bindings: { RUN_TIMEOUT_MS: "100" },
        ...bodyFor(method),
      }),
    carries: ["x-run-id"],
  });
  if (WITH_BODY.has(method)) {
    add({
      path: RUN,
      method,
      status: 413,
      problem: true,
      why: "a body over 6 MiB",
      send: () =>
        run(method, at(world).runPath, {
          token: at(world).token,
          body: new Uint8Array(6 * 1024 * 1024 + 1),
          headers: { "Content-Type": "application/json" },
        }),
    });
  }
  if (method !== "get" && method !== "post") {
    add({
      path: RUN,
      method,
      status: 405,
      problem: true,
      why: "a cortex app",
      send: () => run(method, world.cortex.runPath, { token: world.cortex.token, ...bodyFor(method) }),
      carries: ["allow"],
    });
  }
}
add({
  path: RUN,
  method: "post",
  status: 405,
  problem: true,
  why: "POST on the reserved runs/{run_id}",
  send: () => run("post", `${world.cortex.appPath}/runs/${RUN_ID_EXAMPLE}`, { token: world.cortex.token }),
  carries: ["allow"],
});
add({
  path: RUN,
  method: "post",
  status: 415,
  problem: true,
  why: "a cortex run with a text body",
  send: () =>
    run("post", world.cortex.runPath, {
      token: world.cortex.token,
      body: "hello",
      headers: { "Content-Type": "text/plain" },
    }),
});
add({
  path: RUN,
  method: "get",
  status: 101,
  why: "a WebSocket",
  send: () => run("get", ws.runPath, { token: ws.token, headers: { Upgrade: "websocket" } }),
});
// The app's own statuses: passed through (custom) or enveloped (cortex).
add({
  path: RUN,
  method: "put",
  status: 201,
  why: "a custom app's own 201",
  send: () => run("put", world.custom.runPath, { token: world.custom.token, query: "status=201", ...bodyFor("put") }),
});
add({
  path: RUN,
  method: "get",
  status: 302,
  why: "a cortex app's own 302, enveloped",
  send: () => run("get", world.cortex.runPath, { token: world.cortex.token, query: "status=302" }),
});
add({
  path: RUN,
  method: "get",
  status: 418,
  why: "a cortex app's own 418, enveloped",
  send: () => run("get", world.cortex.runPath, { token: world.cortex.token, query: "status=418" }),
});
add({
  path: RUN,
  method: "patch",
  status: 404,
  why: "a custom app's own 404",
  send: () =>
    run("patch", world.custom.runPath, { token: world.custom.token, query: "status=404", ...bodyFor("patch") }),
});
add({
  path: RUN,
  method: "delete",
  status: 507,
  why: "a custom app's own 507",
  send: () => run("delete", world.custom.runPath, { token: world.custom.token, query: "status=507" }),
});
add({
  path: RUN,
  method: "post",
  status: 429,
  why: "a cortex app's own 429 with Retry-After, enveloped",
  send: () =>
    run("post", world.cortex.runPath, {
      token: world.cortex.token,
      query: "status=429&retryAfter=7",
      ...bodyFor("post"),
    }),
  carries: ["retry-after"],
});

// A host that is neither an API hostname nor a validated domain of the project (custom domains serve the same operations).
add({
  path: RUN,
  method: "post",
  status: 404,
  problem: true,
  why: "an unknown host (unknown_host)",
  send: () =>
    world.api.call(world.cortex.runPath, {
      method: "POST",
      token: world.cortex.token,
      host: "nobody.example.net",
      body: {},
    }),
});

// The same operations on a validated custom domain of the app's project.
for (const method of ALL) {
  const at = (w: World) => appFor(method, w);
  const host = (w: World) => (appFor(method, w) === w.cortex ? w.domains.cortex : w.domains.custom);
  add({
    path: RUN,
    method,
    status: 200,
    why: "a run on a custom domain",
    send: () => run(method, at(world).runPath, { token: at(world).token, host: host(world), ...bodyFor(method) }),
    carries: ["x-run-id"],
  });
  add({
    path: RUN,
    method,
    status: 401,
    problem: true,
    why: "no key, on a custom domain",
    send: () => run(method, at(world).runPath, { host: host(world), ...bodyFor(method) }),
    carries: ["www-authenticate"],
  });
  add({
    path: RUN,
    method,
    status: 404,
    problem: true,
    why: "another project's path on a custom domain",
    send: () =>
      run(method, world.limited.runPath, { token: world.limited.token, host: host(world), ...bodyFor(method) }),
  });
}
add({
  path: RUN,
  method: "put",
  status: 405,
  problem: true,
  why: "a cortex app on a custom domain",
  send: () =>
    run("put", world.cortex.runPath, { token: world.cortex.token, host: world.domains.cortex, ...bodyFor("put") }),
  carries: ["allow"],
});
add({
  path: RUN,
  method: "head",
  status: 405,
  problem: true,
  why: "HEAD on a custom domain",
  send: () => run("head", world.custom.runPath, { token: world.custom.token, host: world.domains.custom }),
  carries: ["allow"],
});
add({
  path: ASYNC,
  method: "get",
  status: 200,
  why: "a queued run, read on a custom domain",
  send: async () =>
    run("get", new URL((await startAsync(world.api, world.cortex)).body.status_url).pathname, {
      token: world.cortex.token,
      host: world.domains.cortex,
    }),
});

// HEAD, on every run path.
add({
  path: RUN,
  method: "head",
  status: 405,
  problem: true,
  why: "HEAD on a cortex app",
  send: () => run("head", world.cortex.runPath, { token: world.cortex.token }),
  carries: ["allow"],
});
add({
  path: RUN,
  method: "head",
  status: 405,
  problem: true,
  why: "HEAD on a custom app",
  send: () => run("head", world.custom.runPath, { token: world.custom.token }),
  carries: ["allow"],
});
add({
  path: RUN,
  method: "head",
  status: 401,
  problem: true,
  why: "HEAD without a key",
  send: () => run("head", world.cortex.runPath),
  carries: ["www-authenticate"],
});
add({
  path: RUN,
  method: "head",
  status: 403,
  problem: true,
  why: "HEAD with a key without runs:invoke",
  send: async () =>
    run("head", world.cortex.runPath, { token: await world.freshToken(world.cortex.projectId, ["builds:read"]) }),
});
add({
  path: RUN,
  method: "head",
  status: 404,
  problem: true,
  why: "HEAD on no such app",
  send: () => run("head", `/v4/${world.cortex.projectId}/no-such-app/run`, { token: world.cortex.token }),
});
add({
  path: RUN,
  method: "head",
  status: 409,
  problem: true,
  why: "HEAD on an app with no ready deployment",
  send: async () => {
    const seed = await seedProject(world.api, { appName: "undeployed" });
    return run("head", `/v4/${seed.projectId}/undeployed/run`, { token: seed.token });
  },
});
add({
  path: RUN,
  method: "head",
  status: 429,
  problem: true,
  why: "HEAD with the run budget spent",
  send: () => run("head", world.limited.runPath, { token: world.limited.token }),
  carries: ["retry-after"],
});
add({
  path: RUN,
  method: "head",
  status: 500,
  problem: true,
  why: "HEAD with a malformed setting",
  send: () => run("head", world.cortex.runPath, { token: world.cortex.token, bindings: { JWT_SECRET: "short" } }),
});
add({
  path: RUN,
  method: "head",
  status: 503,
  problem: true,
  why: "HEAD with D1 unavailable",
  send: async () =>
    run("head", world.cortex.runPath, {
      token: await world.freshToken(world.cortex.projectId),
      bindings: { DB: unavailableD1() },
    }),
});

// The async run: read, cancel, HEAD.
const asyncPath = (app: { appPath: string }, runId = RUN_ID_EXAMPLE) => `${app.appPath}/runs/${runId}`;
for (const method of ["get", "delete"] as const) {
  add({
    path: ASYNC,
    method,
    status: 200,
    why: "a queued run",
    send: async () =>
      run(method, new URL((await startAsync(world.api, world.cortex)).body.status_url).pathname, {
        token: world.cortex.token,
      }),
  });
  add({
    path: ASYNC,
    method,
    status: 401,
    problem: true,
    why: "no key",
    send: () => run(method, asyncPath(world.cortex)),
    carries: ["www-authenticate"],
  });
  add({
    path: ASYNC,
    method,
    status: 403,
    problem: true,
    why: "a key without runs:invoke",
    send: async () =>
      run(method, asyncPath(world.cortex), { token: await world.freshToken(world.cortex.projectId, ["builds:read"]) }),
    carries: ["www-authenticate"],
  });
  add({
    path: ASYNC,
    method,
    status: 404,
    problem: true,
    why: "no such run",
    send: () => run(method, asyncPath(world.cortex), { token: world.cortex.token }),
  });
  add({
    path: ASYNC,
    method,
    status: 429,
    problem: true,
    why: "the run budget spent",
    send: () => run(method, asyncPath(world.limited), { token: world.limited.token }),
    carries: ["retry-after", "ratelimit", "ratelimit-policy"],
  });
  add({
    path: ASYNC,
    method,
    status: 500,
    problem: true,
    why: "a malformed setting",
    send: () => run(method, asyncPath(world.cortex), { token: world.cortex.token, bindings: { JWT_SECRET: "short" } }),
  });
  add({
    path: ASYNC,
    method,
    status: 503,
    problem: true,
    why: "D1 unavailable",
    send: async () =>
      run(method, asyncPath(world.cortex), {
        token: await world.freshToken(world.cortex.projectId),
        bindings: { DB: unavailableD1() },
      }),
    carries: ["retry-after"],
  });
}
// Its status as a stream of events.
const EVENTS = { Accept: "text/event-stream" };
add({
  path: ASYNC,
  method: "get",
  status: 200,
  why: "the stream of an ended run (its last event)",
  send: async () => {
    const started = await startAsync(world.api, world.cortex);
    await consume(world.api, started.message);
    return run("get", new URL(started.body.status_url).pathname, { token: world.cortex.token, headers: EVENTS });
  },
});
add({
  path: ASYNC,
  method: "get",
  status: 204,
  why: "the stream of an ended run resumed after its last event",
  send: async () => {
    const started = await startAsync(world.api, world.cortex);
    await consume(world.api, started.message);
    return run("get", new URL(started.body.status_url).pathname, {
      token: world.cortex.token,
      headers: { ...EVENTS, "Last-Event-ID": "3" },
    });
  },
});
add({
  path: ASYNC,
  method: "get",
  status: 400,
  problem: true,
  why: "a Last-Event-ID that is none of the stream's",
  send: () =>
    run("get", asyncPath(world.cortex), { token: world.cortex.token, headers: { ...EVENTS, "Last-Event-ID": "9" } }),
});
add({
  path: ASYNC,
  method: "delete",
  status: 409,
  problem: true,
  why: "a finished run",
  send: async () => {
    const started = await startAsync(world.api, world.cortex);
    await consume(world.api, started.message);
    return run("delete", new URL(started.body.status_url).pathname, { token: world.cortex.token });
  },
});
add({
  path: ASYNC,
  method: "head",
  status: 405,
  problem: true,
  why: "HEAD on an async run",
  send: () => run("head", asyncPath(world.cortex), { token: world.cortex.token }),
  carries: ["allow"],
});
add({
  path: ASYNC,
  method: "head",
  status: 404,
  problem: true,
  why: "HEAD on a malformed run id",
  send: () => run("head", `${world.cortex.appPath}/runs/run_x`, { token: world.cortex.token }),
});
add({
  path: ASYNC,
  method: "head",
  status: 500,
  problem: true,
  why: "HEAD with a malformed setting",
  send: () => run("head", asyncPath(world.cortex), { token: world.cortex.token, bindings: { JWT_SECRET: "short" } }),
});

/** A D1 that is down: every statement fails as D1 does when it loses its connection. */
const unavailableD1 = () => faultyD1(env.DB, () => true);

// Waited runs (`Prefer: wait`) and deadlines (`Cancel-After`), last: each handed-over run takes its wait (1 s)
// of wall time.
for (const method of ALL) {
  const at = (w: World) => appFor(method, w);
  add({
    path: RUN,
    method,
    status: 200,
    why: "a waited run answered within its wait (Prefer: wait=N)",
    send: () =>
      run(method, at(world).runPath, {
        token: at(world).token,
        headers: { Prefer: "wait=10", ...bodyFor(method).headers },
        body: bodyFor(method).body,
      }),
    carries: ["x-run-id", "preference-applied"],
  });
  add({
    path: RUN,
    method,
    status: 202,
    why: "a waited run handed over past its wait",
    send: () =>
      run(method, at(world).runPath, {
        token: at(world).token,
        query: "delay=1500",
        headers: { Prefer: "wait=1", ...bodyFor(method).headers },
        body: bodyFor(method).body,
      }),
    carries: ["location", "x-run-id", "preference-applied"],
  });
  add({
    path: RUN,
    method,
    status: 400,
    problem: true,
    why: "a Cancel-After that is not a duration",
    send: () =>
      run(method, at(world).runPath, {
        token: at(world).token,
        headers: { "Cancel-After": "soon", ...bodyFor(method).headers },
        body: bodyFor(method).body,
      }),
  });
  add({
    path: RUN,
    method,
    status: 400,
    problem: true,
    why: "a Prefer: wait that is not a whole number of seconds",
    send: () =>
      run(method, at(world).runPath, {
        token: at(world).token,
        headers: { Prefer: "wait=1.5", ...bodyFor(method).headers },
        body: bodyFor(method).body,
      }),
  });
}

let down: { cortex: World["cortex"]; custom: World["cortex"] };
let ws: World["cortex"];

/** A validated custom domain of `app`'s project. */
async function domainOf(w: ReturnType<typeof domainsWorld>, app: { projectId: string; token: string }) {
  const host = `${uniqueLabel("contract")}.example.test`;
  w.dns.set(host, "ok");
  await addDomain(w.api, app, host);
  const validated = await validate(w.api, app, host);
  if (validated.body.status !== "validated") throw new Error(JSON.stringify(validated.body));
  return host;
}

beforeAll(async () => {
  const w = domainsWorld();
  const api = w.api;
  const cortex = await seedRunnable(api);
  const custom = await seedRunnable(api, `${PEER}/upstream/echo`, "custom");
  const freshToken = async (projectId: string, scopes = ["runs:invoke"]) => {
    const expires = new Date(api.clock.now().getTime() + 24 * 3600 * 1000).toISOString();
    const made = await api.json<{ token: string }>(`/v2/projects/${projectId}/service-accounts`, {
      method: "POST",
      body: { name: "contract", expires_at: expires, scopes },
    });
    if (made.status !== 201) throw new Error(JSON.stringify(made.body));
    return made.body.token;
  };
  const limited = await seedRunnable(api);
  world = {
    api,
    cortex,
    custom,
    freshToken,
    limited,
    runs: spentBudget(env.RATE_LIMIT_RUNS, limited.projectId),
    domains: { cortex: await domainOf(w, cortex), custom: await domainOf(w, custom) },
  };
  down = { cortex: await seedRunnable(api, DOWN), custom: await seedRunnable(api, DOWN, "custom") };
  ws = await seedRunnable(api, `${PEER}/upstream/ws`);
  const response = await api.json<Json>("/v2/openapi.json");
  document = response.body;
}, 120_000);

describe("every answer of a run operation is the one the OpenAPI document describes", () => {
  it.each(cases.map((c) => [`${upper(c.method)} ${c.path} ${c.status}: ${c.why}`, c] as const))("%s", async (_, c) => {
    const response = await c.send();
    // On a surprise, the body says why (a WebSocket handshake has none to clone).
    const why = response.status === c.status || response.webSocket ? "" : await response.clone().text();
    expect(response.status, why).toBe(c.status);
    expect(response.headers.get("x-request-id")).toMatch(/^req_/);
    if (c.problem) expect(response.headers.get("content-type")).toBe("application/problem+json");
    for (const name of c.carries ?? []) expect(response.headers.has(name), `${name} on the answer`).toBe(true);
    expect(await departures(c.path, c.method, response)).toEqual([]);
    if (response.status === 101) response.webSocket?.accept();
    response.webSocket?.close();
  });

  it("provokes every status the document lists for a run operation", () => {
    const provoked = new Set(cases.map((c) => `${c.method} ${c.path} ${c.status}`));
    const listed: string[] = [];
    for (const path of [RUN, ASYNC]) {
      for (const [method, operation] of Object.entries((document.paths as Json)[path] as Json)) {
        for (const status of Object.keys((operation as Json).responses as Json))
          if (/^\d{3}$/.test(status)) listed.push(`${method} ${path} ${status}`);
      }
    }
    expect(listed.length).toBeGreaterThan(60);
    expect(listed.filter((entry) => !provoked.has(entry))).toEqual([]);
  });
});
