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
 * Delivers `message` as the queue would hand it over (once, as `queueAttempts`): the consumer runs
 * every attempt itself, pausing through `deps.sleep`, which here moves the fake clock instead of
 * waiting. Returns the attempts D1 counted, the pauses asked for (seconds) and whether the message
 * was acknowledged (`retried` when it was handed back to the queue).
 */
export async function drive(api: Client, message: unknown, overrides: Partial<Record<string, unknown>> = {}, deps: Partial<Deps> = {}, queueAttempts = 1) {
  const delays: number[] = [];
  const sleep = async (ms: number) => {
    delays.push(Math.round(ms / 1000));
    api.clock.advance(ms);
  };
  const { queue: consume } = createWorker(testDeps({ now: api.clock.now, sleep, ...deps }));
  const batch = createMessageBatch(QUEUES.webhookDeliveries, [{ id: `msg-${ids++}`, timestamp: api.clock.now(), attempts: queueAttempts, body: message }]);
  const ctx = createExecutionContext();
  await consume(batch, { ...env, ...overrides } as Env, ctx);
  const result = await getQueueResult(batch, ctx);
  const id = (message as { id?: string }).id;
  const row = id ? await env.DB.prepare("SELECT attempt_count AS n FROM webhook_deliveries WHERE id = ?").bind(id).first<{ n: number }>() : null;
  return { attempts: row?.n ?? 0, delays, acked: result.explicitAcks.length === 1, retried: result.retryMessages.length === 1 };
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
  resent_from: string | null;
}

export async function deliveriesOf(api: Client, projectId: string, runId: string) {
  const { body } = await api.json<{ data: DeliveryJson[] }>(`/v2/projects/${projectId}/webhook-deliveries?run_id=${runId}`);
  return body.data;
}
