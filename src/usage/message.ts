import { z } from "zod";
import type { RefusalCount } from "./refusals";
import { RUN_ENDINGS, RUN_MODES, type RunRecord, type RunStartRecord } from "./run-record";

/**
 * The `usage-records` queue's message: run records and refusal counts of several projects that one
 * isolate flushed together (src/usage/buffer.ts), for the consumer to hand to each project's ledger
 * (src/usage/queue.ts). Fields in snake_case, as every queue's. Version 2 records carry a run's
 * outcome (`ending`, `failure`, its moments); version 1, sent before, carried `timed_out` and
 * `hung_up` instead and is still read (at-least-once: an old message may reach new code). `refusals`
 * is absent from messages sent before refusals were counted, `starts` (runs under way) from those sent
 * before runs under way were known.
 */
export interface UsageRecordsMessage {
  v: 2;
  records: RunRecord[];
  refusals?: RefusalCount[];
  starts?: RunStartRecord[];
}

const msOrNull = z.number().nullable();
/** The fields both versions' records share. */
const recordBase = z.object({
  run_id: z.string().min(1),
  project_id: z.string().min(1),
  app_name: z.string(),
  mode: z.enum(RUN_MODES),
  method: z.string(),
  path: z.string(),
  status_code: z.number().int(),
  duration_ms: z.number(),
  ttfb_ms: msOrNull,
  bytes_in: z.number(),
  bytes_out: z.number(),
  caller: z.string(),
  webhook: z.boolean(),
  request_id: z.string(),
  created_at: z.number(),
});
const recordV2 = recordBase.extend({
  ending: z.enum(RUN_ENDINGS),
  failure: z.string().nullable(),
  called_ms: msOrNull,
  answered_ms: msOrNull,
  handed_over_ms: msOrNull,
}) satisfies z.ZodType<RunRecord>;
/** A record of a version 1 message: the outcome's fields it lacked, and the two flags it had instead. */
const recordV1 = recordBase.extend({
  webhook: z.boolean().default(false),
  timed_out: z.boolean(),
  hung_up: z.boolean(),
});
const refusalCount = z.object({
  project_id: z.string().min(1),
  hour: z.number(),
  reason: z.string(),
  count: z.number().int().nonnegative(),
}) satisfies z.ZodType<RefusalCount>;

const start = recordBase.pick({
  run_id: true,
  project_id: true,
  app_name: true,
  mode: true,
  method: true,
  path: true,
  caller: true,
  request_id: true,
  created_at: true,
}) satisfies z.ZodType<RunStartRecord>;

const fromV1 = ({ timed_out, hung_up, ...record }: z.infer<typeof recordV1>): RunRecord => ({
  ...record,
  ending: hung_up ? "hung_up" : timed_out ? "timeout" : "answered",
  failure: null,
  called_ms: null,
  answered_ms: null,
  handed_over_ms: null,
});

/** Either version, read as what it holds (version 1's records as version 2's). */
export const usageRecordsMessageSchema = z
  .discriminatedUnion("v", [
    z.object({
      v: z.literal(2),
      records: z.array(recordV2),
      refusals: z.array(refusalCount).default([]),
      starts: z.array(start).default([]),
    }),
    z.object({ v: z.literal(1), records: z.array(recordV1), refusals: z.array(refusalCount).default([]) }),
  ])
  .transform((message) => ({
    records: message.v === 2 ? message.records : message.records.map(fromV1),
    refusals: message.refusals,
    starts: message.v === 2 ? message.starts : [],
  }));

/** A queue message holds at most 128 KB: a batch larger than this (as JSON) is split. */
export const MESSAGE_MAX_BYTES = 100_000;

/** What a message of either version holds; `null` for a body that is not one. */
export function contentsOf(
  body: unknown,
): { records: RunRecord[]; refusals: RefusalCount[]; starts: RunStartRecord[] } | null {
  const parsed = usageRecordsMessageSchema.safeParse(body);
  return parsed.success ? parsed.data : null;
}

/**
 * `records`, `refusals` and `starts` as messages of at most MESSAGE_MAX_BYTES each (halved until they
 * fit; one record, count or start always fits: their strings are bounded).
 */
export function messagesOf(
  records: RunRecord[],
  refusals: RefusalCount[] = [],
  starts: RunStartRecord[] = [],
): UsageRecordsMessage[] {
  const message: UsageRecordsMessage = { v: 2, records };
  if (refusals.length) message.refusals = refusals;
  if (starts.length) message.starts = starts;
  if (records.length + refusals.length + starts.length <= 1 || JSON.stringify(message).length <= MESSAGE_MAX_BYTES)
    return [message];
  const half = Math.ceil(records.length / 2);
  const halfCounts = Math.ceil(refusals.length / 2);
  const halfStarts = Math.ceil(starts.length / 2);
  return [
    ...messagesOf(records.slice(0, half), refusals.slice(0, halfCounts), starts.slice(0, halfStarts)),
    ...messagesOf(records.slice(half), refusals.slice(halfCounts), starts.slice(halfStarts)),
  ];
}
