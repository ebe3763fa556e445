import { describe, expect, it } from "vitest";
import { timelineOf } from "./pages/run";
import type { RunRecordItem } from "./api-types";

const ACCEPTED = "2026-11-25T12:00:00.000Z";
const T = Date.parse(ACCEPTED);

const record = (more: Partial<RunRecordItem> = {}) =>
  ({
    run_id: "run_1",
    app_name: "a",
    mode: "sync",
    method: "POST",
    path: "run",
    status_code: 200,
    timed_out: false,
    hung_up: false,
    duration_ms: 900,
    ttfb_ms: null,
    bytes_in: 1,
    bytes_out: 2,
    caller: "admin",
    ending: "answered",
    failure: null,
    handed_over: false,
    times: { called_ms: null, answered_ms: null, first_byte_ms: null, handed_over_ms: null, ended_ms: 900 },
    webhook: null,
    status_url: null,
    request_id: "req_1",
    created_at: ACCEPTED,
    ...more,
  }) as RunRecordItem;

const said = (moments: ReturnType<typeof timelineOf>) => moments.map((m) => `${m.what} +${m.at - T}`);

describe("a run's timeline", () => {
  it("takes the record's moments, in order, each once", () => {
    const times = { called_ms: 5, answered_ms: 300, first_byte_ms: 310, handed_over_ms: null, ended_ms: 900 };
    expect(said(timelineOf(record({ times, ttfb_ms: 310 }), null))).toEqual([
      "Accepted +0",
      "App called +5",
      "App answered +300",
      "First byte +310",
      "Ended +900",
    ]);
  });

  it("puts a waited run's hand-over before its app's answer when it came first", () => {
    const times = { called_ms: 4, answered_ms: 6030, first_byte_ms: null, handed_over_ms: 2002, ended_ms: 6036 };
    expect(said(timelineOf(record({ mode: "wait", handed_over: true, times }), null))).toEqual([
      "Accepted +0",
      "App called +4",
      "Handed over +2002",
      "App answered +6030",
      "Ended +6036",
    ]);
  });

  it("takes a handed-over run's state where its record is not yet there", () => {
    const run = {
      created_at: ACCEPTED,
      started_at: "2026-11-25T12:00:00.010Z",
      handed_over_at: "2026-11-25T12:00:02.000Z",
      finished_at: null,
    } as Parameters<typeof timelineOf>[1];
    expect(said(timelineOf(null, run))).toEqual(["Accepted +0", "App called +10", "Handed over +2000"]);
  });

  it("still says when a record from before the moments were kept ended", () => {
    const times = { called_ms: null, answered_ms: null, first_byte_ms: 40, handed_over_ms: null, ended_ms: 900 };
    expect(said(timelineOf(record({ ttfb_ms: 40, times }), null))).toEqual([
      "Accepted +0",
      "First byte +40",
      "Ended +900",
    ]);
  });
});
