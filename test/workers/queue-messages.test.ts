import { describe, expect, it } from "vitest";
import { asyncRunMessageOf } from "../../src/runs/async/message";
import { validationMessage, validationMessageOf } from "../../src/domains/validation-message";
import { contentsOf, messagesOf } from "../../src/usage/message";
import type { RunRecord } from "../../src/usage/run-record";
import { type DeliveryMessage, deliveryMessageSchema, queueMessageOf } from "../../src/webhooks/message";

const record: RunRecord = {
  run_id: "run_01",
  project_id: "proj_a",
  app_name: "chat",
  mode: "sync",
  method: "POST",
  path: "run",
  status_code: 200,
  ending: "answered",
  failure: null,
  duration_ms: 12,
  ttfb_ms: 3,
  called_ms: 1,
  answered_ms: 3,
  handed_over_ms: null,
  bytes_in: 5,
  bytes_out: 9,
  caller: "admin",
  webhook: false,
  request_id: "req_01",
  created_at: 1_700_000_000_000,
};
const refusal = { project_id: "proj_a", hour: 1_699_999_200_000, reason: "rate_limited", count: 3 };

/** Queue messages are read through their schemas; a message already queued in an older shape still reads. */
describe("queue messages", () => {
  it("usage-records: what is sent reads back as it was", () => {
    const [message] = messagesOf([record], [refusal]);
    expect(contentsOf(JSON.parse(JSON.stringify(message)))).toEqual({
      records: [record],
      refusals: [refusal],
      starts: [],
    });
  });

  it("usage-records: a version 1 message (timed_out, hung_up, no refusals) reads as version 2", () => {
    const { ending, failure, called_ms, answered_ms, handed_over_ms, ...common } = record;
    void [ending, failure, called_ms, answered_ms, handed_over_ms];
    const v1 = {
      v: 1,
      records: [
        { ...common, timed_out: false, hung_up: true },
        { ...common, run_id: "run_02", timed_out: true, hung_up: false },
      ],
    };
    const read = contentsOf(v1);
    expect(read?.refusals).toEqual([]);
    expect(read?.records.map((r) => [r.run_id, r.ending, r.failure, r.called_ms])).toEqual([
      ["run_01", "hung_up", null, null],
      ["run_02", "timeout", null, null],
    ]);
  });

  it("usage-records: a body that is no such message is refused, not half read", () => {
    expect(contentsOf({ v: 3, records: [record] })).toBeNull();
    expect(contentsOf({ v: 2, records: [{ ...record, ending: "vanished" }] })).toBeNull();
    expect(contentsOf({ v: 2, records: [{ ...record, run_id: undefined }] })).toBeNull();
    expect(contentsOf("records")).toBeNull();
  });

  it("async-runs and domain-validations: snake_case, ids checked", () => {
    expect(asyncRunMessageOf({ v: 1, run_id: "run_01", project_id: "proj_a" })).toEqual({
      v: 1,
      run_id: "run_01",
      project_id: "proj_a",
    });
    // The consumer needs only the run's id: a message without the project still runs.
    expect(asyncRunMessageOf({ v: 1, run_id: "run_01" })?.run_id).toBe("run_01");
    expect(asyncRunMessageOf({ v: 1, runId: "run_01" })).toBeNull();
    expect(asyncRunMessageOf({ v: 2, run_id: "run_01" })).toBeNull();
    expect(validationMessageOf({ v: 1, domain_id: "dom_1", claimed_at: 5 })).toEqual(validationMessage("dom_1", 5));
    expect(validationMessageOf({ v: 1, domain_id: "dom_1", claimed_at: "5" })).toBeNull();
  });

  it("domain-validations: sent as version 1; an unversioned message queued before it still read, as version 1", () => {
    const sent = JSON.parse(JSON.stringify(validationMessage("dom_1", 5))) as Record<string, unknown>;
    expect(sent).toEqual({ v: 1, domain_id: "dom_1", claimed_at: 5 });
    expect(validationMessageOf({ domain_id: "dom_1", claimed_at: 5 })).toEqual({
      v: 1,
      domain_id: "dom_1",
      claimed_at: 5,
    });
    // A version this code does not know, or a field of the wrong kind, is turned away (not read as unversioned).
    expect(validationMessageOf({ v: 2, domain_id: "dom_1", claimed_at: 5 })).toBeNull();
    expect(validationMessageOf({ domain_id: "dom_1", claimed_at: "5" })).toBeNull();
    expect(validationMessageOf({ domain_id: "", claimed_at: 5 })).toBeNull();
  });

  it("webhook-deliveries: sent as version 2 in snake_case, read back as the delivery; version 1 (camelCase) still read", () => {
    const delivery: DeliveryMessage = {
      v: 1,
      id: "dlv_01",
      messageId: "dlv_00",
      projectId: "proj_a",
      runId: "run_01",
      endpoint: "https://hooks.example.com/in",
      createdAt: 1_700_000_000_000,
      bodyBytes: 2,
      body: { inline: "{}" },
      secret: { iv: "aXY", ct: "Y3Q" },
    };
    const sent = JSON.parse(JSON.stringify(queueMessageOf(delivery))) as Record<string, unknown>;
    expect(sent.v).toBe(2);
    expect(Object.keys(sent).filter((key) => /[A-Z]/.test(key))).toEqual([]);
    expect(deliveryMessageSchema.parse(sent)).toEqual(delivery);
    // Queued by code before version 2: read as it was.
    expect(deliveryMessageSchema.parse(delivery)).toEqual(delivery);
    const { messageId, ...older } = delivery;
    void messageId;
    expect(deliveryMessageSchema.parse(queueMessageOf(older))).toEqual(older);
    // A field missing (bound as NaN into a NOT NULL column) turns the message away.
    expect(deliveryMessageSchema.safeParse({ ...sent, created_at: undefined }).success).toBe(false);
    expect(deliveryMessageSchema.safeParse({ ...sent, v: 1 }).success).toBe(false);
  });
});
