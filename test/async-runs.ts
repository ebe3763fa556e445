import { createExecutionContext, createMessageBatch, getQueueResult, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { Deps } from "../src/platform/deps";
import { QUEUES } from "../src/platform/triggers";
import { createWorker } from "../src/worker";
import type { AsyncRunMessage } from "../src/runs/async/message";
import { type Client, testDeps } from "./helpers";
import { callWith, capturingQueue } from "./runs";
import { keptRunRows, type RunRows } from "../src/runs/async/rows";
import { keeperName, keeperObject } from "../src/runs/wait/shard";
import type { RunKeeper } from "../src/index";

export interface Accepted {
  run_id: string;
  status: string;
  status_url: string;
}

export interface RunView {
  run_id: string;
  status: string;
  app_name: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  status_code: number | null;
  error: { code: string; message: string } | null;
  result: unknown;
}

/** Starts an async run of `runPath`, keeping its queue message instead of sending it. */
export async function startAsync(
  api: Client,
  app: { runPath: string; token: string },
  options: {
    query?: string;
    body?: unknown;
    rawBody?: string | Uint8Array;
    method?: string;
    headers?: Record<string, string>;
    token?: string;
    /** Settings of the accepting Worker (the run is admitted under them: its limits travel with it). */
    bindings?: Record<string, string>;
  } = {},
) {
  const capture = capturingQueue();
  const method = options.method ?? "POST";
  const headers: Record<string, string> = {
    ...(method === "POST" ? { "Content-Type": "application/json" } : {}),
    ...options.headers,
  };
  const response = await callWith(
    api,
    { ...options.bindings, ASYNC_RUN_QUEUE: capture.queue },
    `${app.runPath}?async=true${options.query ? `&${options.query}` : ""}`,
    {
      method,
      token: options.token ?? app.token,
      headers,
      body: method === "POST" ? (options.rawBody ?? JSON.stringify(options.body ?? { inputs: { n: 1 } })) : undefined,
    },
  );
  const text = await response.text();
  return {
    response,
    text,
    body: (text ? JSON.parse(text) : null) as Accepted & Record<string, unknown>,
    message: capture.sent[0] as AsyncRunMessage | undefined,
    sent: capture.sent,
  };
}

let ids = 0;

interface ConsumeOptions {
  deps?: Partial<Deps>;
  bindings?: Partial<Record<keyof Env, unknown>>;
  /** The queue it arrives on: `async-runs`, or its dead letters' (`QUEUES.asyncRunDeadLetters`). */
  queue?: string;
}

/**
 * Hands `message` to the async-run consumer as the queue would (message id `id`, delivery `attempts`);
 * the webhook queue is captured, so its delivery messages come back to be driven by hand.
 */
export async function consume(
  api: Client,
  message: unknown,
  options: ConsumeOptions & { id?: string; attempts?: number } = {},
) {
  const consumed = await consumeBatch(api, [message], { ...options, ids: options.id ? [options.id] : undefined });
  return { acked: consumed.acked[0]!, retried: consumed.retried[0]!, deliveries: consumed.deliveries };
}

/** `consume` of several messages in one batch, as the queue hands a backlog over: what became of each, in order. */
export async function consumeBatch(
  api: Client,
  messages: unknown[],
  options: ConsumeOptions & { ids?: string[]; attempts?: number } = {},
) {
  const deliveries = capturingQueue();
  const { queue: consumer } = createWorker(testDeps({ now: api.clock.now, ...options.deps }));
  const batch = createMessageBatch(
    options.queue ?? QUEUES.asyncRuns,
    messages.map((body, i) => ({
      id: options.ids?.[i] ?? `arm-${ids++}`,
      timestamp: api.clock.now(),
      attempts: options.attempts ?? 1,
      body,
    })),
  );
  const ctx = createExecutionContext();
  await consumer(batch, { ...env, ...deliveries.bindings, ...options.bindings } as Env, ctx);
  const result = await getQueueResult(batch, ctx);
  return {
    acked: batch.messages.map((m) => result.explicitAcks.includes(m.id)),
    retried: batch.messages.map((m) => result.retryMessages.some((r) => r.msgId === m.id)),
    deliveries: deliveries.sent,
  };
}

/** `GET` of a run's status URL: the parsed view, and the raw bytes of its `result` (it is the last member). */
export async function poll(api: Client, statusUrl: string, token: string) {
  const response = await api.call(new URL(statusUrl).pathname, { token });
  const text = await response.text();
  const at = text.indexOf(',"result":');
  return {
    status: response.status,
    body: JSON.parse(text) as RunView & Record<string, unknown>,
    rawResult: at === -1 ? null : text.slice(at + 10, -1),
  };
}

/** An outbound fetch that counts upstream calls and can hold them until released. */
export function gatedOutbound() {
  let calls = 0;
  let open: () => void = () => undefined;
  let gate: Promise<void> | null = null;
  let arrived: () => void = () => undefined;
  const reached = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  return {
    outbound: {
      fetch: async (request: Request) => {
        calls++;
        arrived();
        if (gate) await gate;
        return fetch(request);
      },
    },
    hold() {
      gate = new Promise<void>((resolve) => {
        open = resolve;
      });
    },
    release: () => open(),
    /** Resolves once the upstream has been called. */
    reached,
    get calls() {
      return calls;
    },
  };
}

/** What names a run's keeper: the run's id and its status URL (`{RUN_BASE}/{project_id}/{app}/runs/{run_id}`). */
export interface KeptRunAddress {
  run_id: string;
  status_url: string;
}

const projectOf = (run: KeptRunAddress) => new URL(run.status_url).pathname.split("/")[2]!;

/** The address of run `runId` of `projectId` when a test has no 202 of it (a waited run's id from its record). */
export const runAddress = (projectId: string, runId: string): KeptRunAddress => ({
  run_id: runId,
  status_url: `http://localhost/v4/${projectId}/app/runs/${runId}`,
});

/** The keeper that keeps `run` (its project's, in the shard of its id). */
export const keeperOf = (run: KeptRunAddress) =>
  keeperObject(env, keeperName(projectOf(run), run.run_id)) as DurableObjectStub<RunKeeper>;

/** The rows of `run`'s keeper, as its owners reach them (`RunRows`). */
export function keptRows(run: KeptRunAddress): RunRows {
  const keeper = keeperOf(run);
  return keptRunRows((op, args) => keeper.runs(op, args));
}

/** `run`'s row in its keeper, as D1's `runById` read it before the move. */
export const keptRun = (run: KeptRunAddress) => keptRows(run).byId(run.run_id);

/** Runs `query` on the SQLite storage of `run`'s keeper (its `async_runs` table): what a test changes by hand. */
export function keptSql(run: KeptRunAddress, query: string, ...values: SqlStorageValue[]) {
  return runInDurableObject(keeperOf(run), (_instance, state) => state.storage.sql.exec(query, ...values).toArray());
}

/**
 * The sweep of `run`'s keeper at `now` (its alarm's first step), as the cron swept D1 before the move;
 * with `bindings` (a capturing queue) in place of the keeper's own.
 */
export function sweepKept(run: KeptRunAddress, now: () => Date, bindings?: Partial<Env>) {
  return runInDurableObject(keeperOf(run), (instance: RunKeeper) => instance.keeper.sweep({ now, bindings }));
}

/** The error a Durable Object call fails with when the platform lost the object (its `retryable` mark). */
export const keeperUnavailable = () => Object.assign(new Error("Network connection lost."), { retryable: true });

/** The value of `prop` of `target`, a function bound to it: what a wrapped binding passes through. */
const bound = <T extends object>(target: T, prop: string | symbol) => {
  const value = Reflect.get(target, prop, target) as unknown;
  return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
};

/**
 * A `RUN_KEEPER` binding whose keepers' `runs(op, args)` (every operation on their runs) goes through
 * `intercept`, which may make the real call (`call()`), watch it, fail it or lose its answer; every
 * other method of the binding and its stubs goes through as it is.
 */
export function interceptedKeepers(
  intercept: (op: string, args: unknown[], call: () => Promise<unknown>) => Promise<unknown>,
) {
  return new Proxy(env.RUN_KEEPER, {
    get(target, prop) {
      if (prop !== "get") return bound(target, prop);
      return (id: DurableObjectId) => {
        const stub = target.get(id);
        return new Proxy(stub, {
          get(s, name) {
            if (name !== "runs") return bound(s, name);
            return (op: string, args: unknown[]) => intercept(op, args, () => s.runs(op as never, args));
          },
        });
      };
    },
  });
}

/**
 * A `RUN_KEEPER` binding whose keepers fail the operations on their runs named `op` (as a keeper the
 * platform reset mid-call does, or one that cannot be reached): every other call goes through.
 */
export const failingKeepers = (op: string) =>
  interceptedKeepers((called, _args, call) => (called === op ? Promise.reject(keeperUnavailable()) : call()));

/** One operation a `readingKeepers` keeper was asked on its runs: its name and the size of its answer (as JSON). */
export interface KeptRead {
  op: string;
  bytes: number;
}

/**
 * A `RUN_KEEPER` binding whose keepers tell what they were asked of their runs (`runs(op, args)`) and how
 * much they answered, in `reads`, as `readingD1` (test/faulty-d1.ts) does for D1: a test holds a path to
 * the runs it reads (a state read that leaves the payloads out, a read that must come once or never).
 */
export const readingKeepers = (reads: KeptRead[]) =>
  interceptedKeepers(async (op, _args, call) => {
    const answer = await call();
    reads.push({ op, bytes: answer === undefined || answer === null ? 0 : JSON.stringify(answer).length });
    return answer;
  });
