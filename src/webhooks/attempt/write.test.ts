import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { attemptRows, deliveryMessages, deliveryRow } from "../../../test/deliveries";
import { client, testDeps } from "../../../test/helpers";
import { PEER } from "../../../test/peers";
import { seedRunnable } from "../../../test/runs";
import { createScope } from "../../platform/scope";
import { claimAttempt } from "../store";
import { createDb } from "../../db/client";
import { newDeliveryContext } from "./context";
import { writeAttempt } from "./write";
import type { SentAttempt } from "./send";
import { faultyDeliveryStores } from "../../../test/delivery-stores";

const api = client();

beforeEach(() => void vi.spyOn(console, "error").mockImplementation(() => undefined));
afterEach(() => vi.restoreAllMocks());

const sent = (over: Partial<SentAttempt> = {}): SentAttempt => ({
  attempt: 1,
  at: new Date(),
  endedAt: Date.now(),
  durationMs: 12,
  statusCode: 204,
  error: null,
  outcome: "delivered",
  retryAfter: null,
  reason: "",
  ...over,
});

describe("record: one attempt in D1", () => {
  it("writes the attempt and settles the delivery by its trigger", async () => {
    const app = await seedRunnable(api);
    const [message] = await deliveryMessages(api, app.projectId, `${PEER}/hooks/record`, ["{}"]);
    await claimAttempt(createDb(env.DB), message!, new Date());
    const ctx = newDeliveryContext(createScope(env, createExecutionContext(), testDeps()));
    expect(await writeAttempt(ctx, message!, sent())).toMatchObject({ recorded: true });
    expect(await attemptRows(message!.id)).toEqual([
      { attempt: 1, status_code: 204, error: null, duration_ms: 12, outcome: "delivered" },
    ]);
    expect(await deliveryRow(message!.id)).toMatchObject({ status: "delivered", last_status_code: 204 });
  });

  it("says so when its store refuses the write twice, and writes nothing", async () => {
    const app = await seedRunnable(api);
    const [message] = await deliveryMessages(api, app.projectId, `${PEER}/hooks/record-refused`, ["{}"]);
    const refused: unknown[] = [];
    const failing = faultyDeliveryStores((statement) => statement.includes("webhook_attempts"), refused as never);
    const ctx = newDeliveryContext(createScope({ ...env, ...failing } as Env, createExecutionContext(), testDeps()));
    expect(await writeAttempt(ctx, message!, sent({ outcome: "retry", statusCode: 404 }))).toMatchObject({
      recorded: false,
    });
    expect(await attemptRows(message!.id)).toEqual([]);
    expect(refused.length).toBeGreaterThanOrEqual(2);
  });
});
