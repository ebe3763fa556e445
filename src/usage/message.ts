import type { RunRecord } from "./run-record";

/**
 * The `usage-records` queue's message: run records of several projects that one isolate flushed
 * together (src/usage/buffer.ts), for the consumer to hand to each project's ledger (src/usage/queue.ts).
 * Version 2 carries a run's outcome (`ending`, `failure`, its moments); version 1, sent before it,
 * carried `timed_out` and `hung_up` instead and is still read.
 */
export interface UsageRecordsMessage {
  v: 2;
  records: RunRecord[];
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

/** The records of a message of either version; `null` for a body that is not one. */
export function recordsOf(body: unknown): RunRecord[] | null {
  if (typeof body !== "object" || body === null) return null;
  const { v, records } = body as { v?: unknown; records?: unknown };
  if (!Array.isArray(records)) return null;
  if (v === 2) return records as RunRecord[];
  if (v === 1) return (records as RecordV1[]).map(fromV1);
  return null;
}

/** `records` as messages of at most MESSAGE_MAX_BYTES each (halved until they fit; one record always fits a run's fields). */
export function messagesOf(records: RunRecord[]): UsageRecordsMessage[] {
  const message: UsageRecordsMessage = { v: 2, records };
  if (records.length <= 1 || JSON.stringify(message).length <= MESSAGE_MAX_BYTES) return [message];
  const half = Math.ceil(records.length / 2);
  return [...messagesOf(records.slice(0, half)), ...messagesOf(records.slice(half))];
}
