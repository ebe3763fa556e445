import type { RefusalCount } from "./refusals";
import type { RunRecord } from "./run-record";

/**
 * The `usage-records` queue's message: run records and refusal counts of several projects that one
 * isolate flushed together (src/usage/buffer.ts), for the consumer to hand to each project's ledger
 * (src/usage/queue.ts). `refusals` is absent from messages sent before refusals were counted.
 */
export interface UsageRecordsMessage {
  v: 1;
  records: RunRecord[];
  refusals?: RefusalCount[];
}

/** A queue message holds at most 128 KB: a batch larger than this (as JSON) is split. */
export const MESSAGE_MAX_BYTES = 100_000;

export const isUsageRecordsMessage = (body: unknown): body is UsageRecordsMessage =>
  typeof body === "object" &&
  body !== null &&
  (body as UsageRecordsMessage).v === 1 &&
  Array.isArray((body as UsageRecordsMessage).records) &&
  ((body as UsageRecordsMessage).refusals === undefined || Array.isArray((body as UsageRecordsMessage).refusals));

/**
 * `records` and `refusals` as messages of at most MESSAGE_MAX_BYTES each (halved until they fit; one
 * record or count always fits: their strings are bounded).
 */
export function messagesOf(records: RunRecord[], refusals: RefusalCount[] = []): UsageRecordsMessage[] {
  const message: UsageRecordsMessage = refusals.length ? { v: 1, records, refusals } : { v: 1, records };
  if (records.length + refusals.length <= 1 || JSON.stringify(message).length <= MESSAGE_MAX_BYTES) return [message];
  const half = Math.ceil(records.length / 2);
  const halfCounts = Math.ceil(refusals.length / 2);
  return [
    ...messagesOf(records.slice(0, half), refusals.slice(0, halfCounts)),
    ...messagesOf(records.slice(half), refusals.slice(halfCounts)),
  ];
}
