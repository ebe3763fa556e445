import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { Deps } from "../src/platform/deps";
import { QUEUES } from "../src/platform/triggers";
import { createWorker } from "../src/worker";
import type { AsyncRunMessage } from "../src/runs/async/message";
import { type Client, testDeps } from "./helpers";
import { callWith, capturingQueue } from "./runs";

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

/**
 * Hands `message` to the async-run consumer as the queue would (message id `id`, delivery `attempts`);
 * the webhook queue is captured, so its delivery messages come back to be driven by hand.
 */
export async function consume(
  api: Client,
  message: unknown,
  options: {
    id?: string;
    attempts?: number;
    deps?: Partial<Deps>;
    bindings?: Partial<Record<keyof Env, unknown>>;
  } = {},
) {
  const deliveries = capturingQueue();
  const { queue: consumer } = createWorker(testDeps({ now: api.clock.now, ...options.deps }));
  const batch = createMessageBatch(QUEUES.asyncRuns, [
    { id: options.id ?? `arm-${ids++}`, timestamp: api.clock.now(), attempts: options.attempts ?? 1, body: message },
  ]);
  const ctx = createExecutionContext();
  await consumer(batch, { ...env, ...deliveries.bindings, ...options.bindings } as Env, ctx);
  const result = await getQueueResult(batch, ctx);
  return {
    acked: result.explicitAcks.length === 1,
    retried: result.retryMessages.length === 1,
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
