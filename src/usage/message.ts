import type { RunRecord } from "./run-record";

/**
 * The `usage-records` queue's message: run records of several projects that one isolate flushed
 * together (src/usage/buffer.ts), for the consumer to hand to each project's ledger (src/usage/queue.ts).
 */
export interface UsageRecordsMessage {
  v: 1;
  records: RunRecord[];
}

/** A queue message holds at most 128 KB: a batch larger than this (as JSON) is split. */
export const MESSAGE_MAX_BYTES = 100_000;

export const isUsageRecordsMessage = (body: unknown): body is UsageRecordsMessage =>
  typeof body === "object" &&
  body !== null &&
  (body as UsageRecordsMessage).v === 1 &&
  Array.isArray((body as UsageRecordsMessage).records);

/** `records` as messages of at most MESSAGE_MAX_BYTES each (halved until they fit; one record always fits a run's fields). */
export function messagesOf(records: RunRecord[]): UsageRecordsMessage[] {
  const message: UsageRecordsMessage = { v: 1, records };
  if (records.length <= 1 || JSON.stringify(message).length <= MESSAGE_MAX_BYTES) return [message];
  const half = Math.ceil(records.length / 2);
  return [...messagesOf(records.slice(0, half)), ...messagesOf(records.slice(half))];
}
