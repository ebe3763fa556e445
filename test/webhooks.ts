import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { Deps } from "../src/platform/deps";
import { QUEUES } from "../src/platform/triggers";
import { createWorker } from "../src/worker";
import { type Client, testDeps } from "./helpers";
import { callWith, capturingQueue } from "./runs";

/** Runs `runPath` with a webhook to `endpoint`, keeping the queue message instead of sending it. */
export async function runWithWebhook(
  api: Client,
  app: { runPath: string; token: string },
  endpoint: string,
  options: { secret?: string; query?: string; body?: unknown } = {},
) {
  const capture = capturingQueue();
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (options.secret !== undefined) headers["X-Webhook-Secret"] = options.secret;
  const response = await callWith(api, { WEBHOOK_QUEUE: capture.queue }, `${app.runPath}?${options.query ?? ""}&webhookEndpoint=${encodeURIComponent(endpoint)}`, {
    method: "POST",
    token: app.token,
    headers,
    body: JSON.stringify(options.body ?? { inputs: { n: 1 } }),
  });
  return { response, text: await response.text(), messages: capture.sent };
}

let ids = 0;

/**
 * Delivers `message` as the queue would: attempt 1, then again for every retry the consumer asks for,
 * moving the fake clock by the delay plus the consumer's batch timeout. Returns how many attempts ran.
 */
export async function drive(api: Client, message: unknown, overrides: Partial<Record<string, unknown>> = {}, deps: Partial<Deps> = {}) {
  const { queue: consume } = createWorker(testDeps({ now: api.clock.now, ...deps }));
  const delays: number[] = [];
  for (let attempts = 1; attempts <= 10; attempts++) {
    const batch = createMessageBatch(QUEUES.webhookDeliveries, [{ id: `msg-${ids++}`, timestamp: api.clock.now(), attempts, body: message }]);
    // The test harness records that a message was retried but not its delay: watch `retry` for it.
    const real = batch.messages[0]!;
    let delay: number | undefined;
    const watched = {
      id: real.id,
      timestamp: real.timestamp,
      body: real.body,
      attempts: real.attempts,
      ack: () => real.ack(),
      retry: (options?: QueueRetryOptions) => {
        delay = options?.delaySeconds ?? 0;
        real.retry(options);
      },
    };
    const view = { queue: batch.queue, messages: [watched], ackAll: () => batch.ackAll(), retryAll: (o?: QueueRetryOptions) => batch.retryAll(o) };
    const ctx = createExecutionContext();
    await consume(view as unknown as MessageBatch<unknown>, { ...env, ...overrides } as Env, ctx);
    const result = await getQueueResult(batch, ctx);
    if (result.retryMessages.length === 0) return { attempts, delays, acked: result.explicitAcks.length === 1 };
    delays.push(delay!);
    api.clock.advance((delay! + 1) * 1000);
  }
  throw new Error("the consumer kept retrying past 10 attempts");
}

export interface DeliveryJson {
  request_id: string;
  run_id: string;
  status: string;
  endpoint: string;
  signed: boolean;
  body_bytes: number;
  attempts: { attempt: number; at: string; status_code: number | null; error: string | null; duration_ms: number }[];
  last_status_code: number | null;
  last_error: string | null;
}

export async function deliveriesOf(api: Client, projectId: string, runId: string) {
  const { body } = await api.json<{ data: DeliveryJson[] }>(`/v2/projects/${projectId}/webhook-deliveries?run_id=${runId}`);
  return body.data;
}
