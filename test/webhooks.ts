import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import type { Deps } from "../src/platform/deps";
import { createScope } from "../src/platform/scope";
import { newDeliveryContext } from "../src/webhooks/attempt/context";
import { deliver, type DeliveryEnd } from "../src/webhooks/deliver";
import { deliveryMessageSchema } from "../src/webhooks/message";
import type { ReceiverTaskJson } from "../src/webhooks/receiver-routes";
import { deliveryRow, until } from "./deliveries";
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
  const response = await callWith(
    api,
    { ...capture.bindings },
    `${app.runPath}?${options.query ?? ""}&webhookEndpoint=${encodeURIComponent(endpoint)}`,
    {
      method: "POST",
      token: app.token,
      headers,
      body: JSON.stringify(options.body ?? { inputs: { n: 1 } }),
    },
  );
  return { response, text: await response.text(), messages: capture.sent };
}

/** A run of `app` with its webhook to `endpoint`, signed with `secret`, its delivery handed to the real lane; answered 200. */
export async function runToLane(
  api: Client,
  app: { runPath: string; token: string },
  endpoint: string,
  secret: string,
  n: number,
): Promise<void> {
  const response = await callWith(api, {}, `${app.runPath}?webhookEndpoint=${encodeURIComponent(endpoint)}`, {
    method: "POST",
    token: app.token,
    headers: { "Content-Type": "application/json", "X-Webhook-Secret": secret },
    body: JSON.stringify({ inputs: { n } }),
  });
  expect(response.status).toBe(200);
  await response.text();
}

/**
 * Makes `message`'s attempts as its lane makes them (`deliver`, the code of src/webhooks/lane.ts), in
 * the test's isolate so that pauses move the fake clock instead of waiting. Returns the attempts D1
 * counted, the pauses asked for (seconds) and whether the delivery ended (`acked`) or would be run
 * again by its lane (`retried`). The lanes themselves, behind the real queue, are lanes.test.ts's.
 */
export async function drive(
  api: Client,
  message: unknown,
  overrides: Partial<Record<string, unknown>> = {},
  deps: Partial<Deps> = {},
) {
  const delays: number[] = [];
  const sleep = async (ms: number) => {
    delays.push(Math.round(ms / 1000));
    // A pause counts from the end of the attempt's request (the outcome's write inside it), so it is
    // asked a few ms short of its whole seconds; the fake clock, which never sees the request's own
    // duration, moves the whole seconds, as the wall clock would from one attempt's start to the next.
    api.clock.advance(Math.max(ms, Math.round(ms / 1000) * 1000));
  };
  const parsed = deliveryMessageSchema.safeParse(message);
  const id = (message as { id?: string }).id;
  let end: DeliveryEnd = { kind: "settled" };
  if (parsed.success) {
    const scope = createScope(
      { ...env, ...overrides } as Env,
      createExecutionContext(),
      testDeps({ now: api.clock.now, sleep, ...deps }),
    );
    end = await deliver(newDeliveryContext(scope), parsed.data);
  }
  const row = id ? await deliveryRow(id) : null;
  return {
    attempts: row?.attempt_count ?? 0,
    delays,
    acked: end.kind === "settled",
    retried: end.kind === "interrupted",
  };
}

export interface DeliveryJson {
  delivery_id: string;
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
  const { body } = await api.json<{ data: DeliveryJson[] }>(
    `/v2/projects/${projectId}/webhook-deliveries?run_id=${runId}`,
  );
  return body.data;
}

/** The API path of a project's receiver `origin` (URL-encoded), and `rest` after it. */
export const receiverPath = (app: { projectId: string }, origin: string, rest = "") =>
  `/v2/projects/${app.projectId}/webhook-receivers/${encodeURIComponent(origin)}${rest}`;

/** Polls a receiver's task until it is over (finished or cancelled); its last state. */
export async function followTask(
  api: Client,
  app: { projectId: string; token: string },
  origin: string,
  taskId: string,
  withinMs = 30_000,
) {
  return until(
    async () =>
      (await api.json<ReceiverTaskJson>(receiverPath(app, origin, `/tasks/${taskId}`), { token: app.token })).body,
    (task) => task.status === "finished" || task.status === "cancelled",
    withinMs,
  );
}
