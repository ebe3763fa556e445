import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { Deps } from "../src/platform/deps";
import type { Outbound } from "../src/platform/outside";
import { createScope } from "../src/platform/scope";
import { QUEUES } from "../src/platform/triggers";
import { createWorker } from "../src/worker";
import type { StatementGroup } from "../src/db/statement-group";
import { Semaphore } from "../src/platform/semaphore";
import { newDeliveryContext } from "../src/webhooks/attempt/context";
import { deliver } from "../src/webhooks/deliver";
import { handNewDeliveryToLane } from "../src/webhooks/enqueue";
import { LANE_CONCURRENCY } from "../src/webhooks/lane-capacity";
import { type DeliveryMessage, deliveryMessageSchema } from "../src/webhooks/message";
import { deliveryStoreOf } from "./delivery-stores";
import { type Client, testDeps } from "./helpers";
import { capturingQueue } from "./runs";

/** One request as the platform saw it: when the consumer called fetch, when a connection took it, when it ended. */
export interface Sent {
  url: string;
  calledAt: number;
  sentAt: number;
  endedAt: number;
}

/**
 * An outbound fetch that behaves as Workers do with connections (at most `cap` open per invocation,
 * the rest wait inside the runtime) and records every request, the most open at once and how many
 * had to wait for a connection.
 */
export function platformOutbound(cap = 6): Outbound & { sent: Sent[]; maxOpen: () => number; waited: () => number } {
  let open = 0;
  let maxOpen = 0;
  let waited = 0;
  const queue: (() => void)[] = [];
  const sent: Sent[] = [];
  return {
    sent,
    maxOpen: () => maxOpen,
    waited: () => waited,
    async fetch(request: Request) {
      const calledAt = Date.now();
      if (open >= cap) {
        waited++;
        await new Promise<void>((resolve) => queue.push(resolve));
      }
      open++;
      maxOpen = Math.max(maxOpen, open);
      const sentAt = Date.now();
      try {
        return await fetch(request);
      } finally {
        open--;
        sent.push({ url: request.url, calledAt, sentAt, endedAt: Date.now() });
        queue.shift()?.();
      }
    },
  };
}

/** Queue messages of deliveries of `bodies` to `endpoint` (records written as the run path writes them). */
export async function deliveryMessages(
  api: Client,
  projectId: string,
  endpoint: string,
  bodies: string[],
  secret?: string,
): Promise<DeliveryMessage[]> {
  const capture = capturingQueue();
  const queueEnv = { ...env, ...capture.bindings };
  const scope = createScope(queueEnv, createExecutionContext(), testDeps({ now: api.clock.now }));
  for (const [i, body] of bodies.entries()) {
    await handNewDeliveryToLane(scope, { projectId, runId: `run_${endpoint.slice(-6)}_${i}`, endpoint, secret, body });
  }
  return capture.sent as DeliveryMessage[];
}

let ids = 0;

/**
 * Runs `messages` as one lane runs its backlog (src/webhooks/lane.ts): in order of arrival, at most
 * LANE_CONCURRENCY in progress, each with `deliver`, in the test's isolate so that pauses are
 * taken at once (recorded) on the fake clock and `deps.outbound` can behave like the platform. A
 * malformed message is dropped as the consumer drops it. `explicitAcks` are the deliveries that ended,
 * `retryMessages` those the lane would run again.
 */
export async function consume(
  api: Client,
  messages: unknown[],
  options: { deps?: Partial<Deps>; env?: Record<string, unknown>; budget?: Semaphore; writes?: StatementGroup } = {},
) {
  const pauses: number[] = [];
  const deps: Deps = testDeps({
    now: api.clock.now,
    sleep: async (ms: number) => {
      pauses.push(ms);
      api.clock.advance(ms);
    },
    ...options.deps,
  });
  const scope = createScope({ ...env, ...options.env } as Env, createExecutionContext(), deps);
  const ctx = newDeliveryContext(scope, { budget: options.budget, writes: options.writes });
  const slots = new Semaphore(LANE_CONCURRENCY);
  const result = { explicitAcks: [] as string[], retryMessages: [] as string[] };
  await Promise.all(
    messages.map(async (body) => {
      const id = `m${ids++}`;
      const parsed = deliveryMessageSchema.safeParse(body);
      if (!parsed.success) return void result.explicitAcks.push(id);
      const release = await slots.acquire();
      try {
        const end = await deliver(ctx, parsed.data);
        (end.kind === "settled" ? result.explicitAcks : result.retryMessages).push(id);
      } finally {
        release();
      }
    }),
  );
  return { result, pauses, groups: ctx.groups() };
}

/**
 * Runs the real `webhook-deliveries` consumer over `messages` (one batch, handed to it directly): it
 * passes each to its lane, the real Durable Object, which delivers from its alarm. The acks and retries.
 */
export async function passToLanes(api: Client, messages: unknown[]) {
  const batch = createMessageBatch(
    QUEUES.webhookDeliveries,
    messages.map((body, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  await createWorker(testDeps({ now: api.clock.now })).queue(batch, env, ctx);
  return getQueueResult(batch, ctx);
}

/** Polls `probe` every 50 ms until it returns a value `done` accepts or `withinMs` pass; the last value. */
export async function until<T>(probe: () => Promise<T>, done: (value: T) => boolean, withinMs: number): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() >= deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Delivery `id`'s record, wherever it is recorded (test/delivery-stores.ts), or null. */
export async function deliveryRow(id: string) {
  const store = (await deliveryStoreOf(id)) ?? env.DB;
  return store
    .prepare(
      "SELECT status, attempt_count, last_status_code, last_error, body, body_key, sealed_secret, body_purged_at FROM webhook_deliveries WHERE id = ?",
    )
    .bind(id)
    .first<{
      status: string;
      attempt_count: number;
      last_status_code: number | null;
      last_error: string | null;
      body: string | null;
      body_key: string | null;
      sealed_secret: string | null;
      body_purged_at: number | null;
    }>();
}

/** Delivery `id`'s attempts, in order, wherever it is recorded. */
export async function attemptRows(id: string) {
  const store = (await deliveryStoreOf(id)) ?? env.DB;
  const { results } = await store
    .prepare(
      "SELECT attempt, status_code, error, duration_ms, outcome FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt",
    )
    .bind(id)
    .all<{
      attempt: number;
      status_code: number | null;
      error: string | null;
      duration_ms: number;
      outcome: string;
    }>();
  return results;
}
