import { describe, expect, it, vi } from "vitest";
import { consume, startAsync } from "../../test/async-runs";
import { client } from "../../test/helpers";
import { DOWN } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import type { RunMode, RunOutcome, RunStart } from "./outcome";
import { foldOutcome, type RunEvent, runEvents } from "./run-events";

// One place ends a run: every owner records the run's events and folds them here (issue 43, Must 2).
// Parity: the same events give the same outcome in every mode; a run of each mode whose app did the
// same thing ends with the same outcome, whichever owner (the Worker, the keeper, the consumer) ended it.

const api = client();
const MODES: RunMode[] = ["sync", "wait", "async"];

const startIn = (mode: RunMode): RunStart => ({
  runId: "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c",
  projectId: "proj_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c",
  appName: "hello",
  path: "run",
  method: "POST",
  mode,
  caller: "sa:1",
  requestId: "req_1",
  acceptedAt: 1_000,
});
const END = { at: 1_900, bytesIn: 7, bytesOut: 42, webhook: false };
const BAD_GATEWAY = { code: "bad_gateway", status: 502 };

/** Stories of a run as events, and the outcome's verdict each must give (status, ending, failure). */
const STORIES: [string, RunEvent[], Pick<RunOutcome, "status" | "ending" | "failure">][] = [
  [
    "the app answers 200, whole",
    [
      { kind: "called", at: 1_010 },
      { kind: "answered", at: 1_200, status: 200 },
    ],
    { status: 200, ending: "answered", failure: null },
  ],
  [
    "the app answers 418, whole",
    [
      { kind: "called", at: 1_010 },
      { kind: "answered", at: 1_200, status: 418 },
    ],
    { status: 418, ending: "answered", failure: { by: "app", status: 418 } },
  ],
  [
    "the app cannot be reached",
    [
      { kind: "called", at: 1_010 },
      { kind: "failed", problem: BAD_GATEWAY },
    ],
    { status: 502, ending: "unreachable", failure: { by: "gateway", code: "bad_gateway" } },
  ],
  [
    "a passed-through answer's body breaks off",
    [
      { kind: "called", at: 1_010 },
      { kind: "answered", at: 1_200, status: 200 },
      { kind: "body_ended", how: "broken", firstByteAt: 1_300 },
    ],
    { status: 200, ending: "unreachable", failure: { by: "gateway", code: "bad_gateway" } },
  ],
  [
    "a passed-through answer runs idle, though its caller left",
    [
      { kind: "called", at: 1_010 },
      { kind: "answered", at: 1_200, status: 200 },
      { kind: "hung_up" },
      { kind: "body_ended", how: "idle", firstByteAt: null },
    ],
    { status: 200, ending: "timeout", failure: { by: "gateway", code: "gateway_timeout" } },
  ],
  [
    "the deadline ends a passed-through answer's body",
    [
      { kind: "called", at: 1_010 },
      { kind: "answered", at: 1_200, status: 200 },
      { kind: "deadline" },
      { kind: "body_ended", how: "cancelled", firstByteAt: 1_300 },
    ],
    { status: 200, ending: "deadline", failure: { by: "gateway", code: "run_deadline" } },
  ],
  [
    "the caller leaves before any answer",
    [{ kind: "called", at: 1_010 }, { kind: "hung_up" }],
    { status: 499, ending: "hung_up", failure: null },
  ],
  [
    "the caller leaves during a whole answer",
    [{ kind: "called", at: 1_010 }, { kind: "answered", at: 1_200, status: 500 }, { kind: "hung_up" }],
    { status: 500, ending: "hung_up", failure: { by: "app", status: 500 } },
  ],
  [
    "a handed-over run's caller left: the run goes on to its answer",
    [
      { kind: "called", at: 1_010 },
      { kind: "handed_over", at: 1_100 },
      { kind: "hung_up" },
      { kind: "answered", at: 1_200, status: 200 },
    ],
    { status: 200, ending: "answered", failure: null },
  ],
  [
    "the consumer died mid-call",
    [
      { kind: "called", at: 1_010 },
      { kind: "failed", problem: { code: "run_interrupted", status: 502 } },
    ],
    { status: 502, ending: "interrupted", failure: { by: "gateway", code: "run_interrupted" } },
  ],
  [
    "refused once the app was known",
    [{ kind: "failed", problem: { code: "payload_too_large", status: 413 } }],
    { status: 413, ending: "refused", failure: { by: "gateway", code: "payload_too_large" } },
  ],
];

describe("the one fold of a run's events", () => {
  it.each(STORIES)("gives the same outcome in every mode: %s", (_, events, verdict) => {
    const outcomes = MODES.map((mode) => foldOutcome(startIn(mode), events, END));
    for (const [i, outcome] of outcomes.entries()) {
      expect(outcome.mode).toBe(MODES[i]!);
      expect({ ...outcome, mode: "same" }).toEqual({ ...outcomes[0], mode: "same" });
    }
    expect(outcomes[0]).toMatchObject(verdict);
  });

  it("places each moment from its event, and the rest from the start and the end", () => {
    const outcome = foldOutcome(startIn("wait"), STORIES[8]![1], END);
    expect(outcome).toEqual({
      ...startIn("wait"),
      acceptedAt: undefined,
      status: 200,
      ending: "answered",
      failure: null,
      times: {
        acceptedAt: 1_000,
        calledAt: 1_010,
        answeredAt: 1_200,
        firstByteAt: null,
        handedOverAt: 1_100,
        endedAt: 1_900,
      },
      bytesIn: 7,
      bytesOut: 42,
      webhook: false,
    });
    // Admission's mode wins over the one read leniently at the start.
    expect(foldOutcome(startIn("wait"), [{ kind: "admitted", mode: "sync" }], END).mode).toBe("sync");
  });

  it("ends a run once: later events and ends change nothing", () => {
    const handed: RunOutcome[] = [];
    const events = runEvents(startIn("sync"), (outcome) => handed.push(outcome));
    events.record({ kind: "called", at: 1_010 });
    expect(events.ended(END)).toBe(true);
    events.record({ kind: "hung_up" });
    expect(events.ended({ ...END, at: 5_000 })).toBe(false);
    expect(handed).toHaveLength(1);
    expect(handed[0]).toMatchObject({ status: 499, ending: "hung_up", times: { endedAt: 1_900 } });
  });
});

interface Recorded {
  mode: RunMode;
  status_code: number;
  ending: string;
  failure: RunOutcome["failure"];
}

/** The usage record of `runId`, once its owner ended it. */
async function recorded(projectId: string, token: string, runId: string): Promise<Recorded> {
  let record!: Recorded;
  await vi.waitFor(
    async () => {
      const read = await api.json<Recorded>(`/v2/projects/${projectId}/runs/${runId}`, { token });
      expect(read.status).toBe(200);
      record = read.body;
    },
    { timeout: 15_000, interval: 20 },
  );
  return record;
}

/** The same run of `app` in each mode, each ended by its owner: its record's mode and verdict. */
async function eachMode(app: { projectId: string; runPath: string; token: string }, query: string) {
  const runIds: string[] = [];
  const sync = await api.call(`${app.runPath}${query}`, { token: app.token, method: "POST", body: {} });
  await sync.text();
  runIds.push(sync.headers.get("x-run-id")!);
  const wait = await api.call(`${app.runPath}${query}`, {
    token: app.token,
    method: "POST",
    body: {},
    headers: { Prefer: "wait=5" },
  });
  await wait.text();
  runIds.push(wait.headers.get("x-run-id")!);
  const started = await startAsync(api, app, { query: query.slice(1), body: {} });
  expect(await consume(api, started.message)).toMatchObject({ acked: true });
  runIds.push(started.body.run_id);
  const records = [];
  for (const runId of runIds) {
    const { mode, status_code: status, ending, failure } = await recorded(app.projectId, app.token, runId);
    records.push({ mode, verdict: { status, ending, failure } });
  }
  return records;
}

describe("parity through the owners: the Worker, the keeper and the consumer end alike", { timeout: 60_000 }, () => {
  it.each([
    ["the app answers 418", "", "?status=418", STORIES[1]!],
    ["the app cannot be reached", DOWN, "", STORIES[2]!],
  ] as const)("%s", async (_, origin, query, story) => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const app = await seedRunnable(api, ...(origin === "" ? [] : [origin]));
    const records = await eachMode(app, query);
    expect(records.map((r) => r.mode)).toEqual(MODES);
    // What each owner recorded is what the one fold gives for the story's events, in every mode.
    const [, events, verdict] = story;
    for (const [i, record] of records.entries()) {
      const outcome = foldOutcome(startIn(MODES[i]!), events, END);
      expect(record.verdict).toEqual({ status: outcome.status, ending: outcome.ending, failure: outcome.failure });
      expect(record.verdict).toEqual(verdict);
    }
    vi.restoreAllMocks();
  });
});
