import type { RefusalCount } from "./refusals";
import type { RunRecord } from "./run-record";

/**
 * The `usage-records` queue's message: run records and refusal counts of several projects that one
 * isolate flushed together (src/usage/buffer.ts), for the consumer to hand to each project's ledger
 * (src/usage/queue.ts). Version 2 records carry a run's outcome (`ending`, `failure`, its moments);
 * version 1, sent before, carried `timed_out` and `hung_up` instead and is still read. `refusals` is
 * absent from messages sent before refusals were counted.
 */
export interface UsageRecordsMessage {
  v: 2;
  records: RunRecord[];
  refusals?: RefusalCount[];
}

/** A record of a version 1 message: the outcome's fields it lacked, and the two flags it had instead. */
type RecordV1 = Omit<RunRecord, "ending" | "failure" | "called_ms" | "answered_ms" | "handed_over_ms"> & {
  timed_out: boolean;
  hung_up: boolean;
};

/** A queue message holds at most 128 KB: a batch larger than this (as JSON) is split. */
export const MESSAGE_MAX_BYTES = 100_000;

const fromV1 = ({ timed_out, hung_up, ...record }: RecordV1): RunRecord => ({
  ...record,
  ending: hung_up ? "hung_up" : timed_out ? "timeout" : "answered",
  failure: null,
  called_ms: null,
  answered_ms: null,
  handed_over_ms: null,
});

/** What a message of either version holds; `null` for a body that is not one. */
export function contentsOf(body: unknown): { records: RunRecord[]; refusals: RefusalCount[] } | null {
  if (typeof body !== "object" || body === null) return null;
  const { v, records, refusals = [] } = body as { v?: unknown; records?: unknown; refusals?: unknown };
  if (!Array.isArray(records) || !Array.isArray(refusals)) return null;
  if (v === 2) return { records: records as RunRecord[], refusals: refusals as RefusalCount[] };
  if (v === 1) return { records: (records as RecordV1[]).map(fromV1), refusals: refusals as RefusalCount[] };
  return null;
}

/**
 * `records` and `refusals` as messages of at most MESSAGE_MAX_BYTES each (halved until they fit; one
 * record or count always fits: their strings are bounded).
 */
export function messagesOf(records: RunRecord[], refusals: RefusalCount[] = []): UsageRecordsMessage[] {
  const message: UsageRecordsMessage = refusals.length ? { v: 2, records, refusals } : { v: 2, records };
  if (records.length + refusals.length <= 1 || JSON.stringify(message).length <= MESSAGE_MAX_BYTES) return [message];
  const half = Math.ceil(records.length / 2);
  const halfCounts = Math.ceil(refusals.length / 2);
  return [
    ...messagesOf(records.slice(0, half), refusals.slice(0, halfCounts)),
    ...messagesOf(records.slice(half), refusals.slice(halfCounts)),
  ];
}
