import { z } from "@hono/zod-openapi";

/**
 * The usage API's answers as the dashboard reads them: `z.infer` of the API's response schemas.
 * STAND-IN until src/usage/routes.ts lands: the shapes of the contract, to be replaced by its exports.
 */
export const RunRecordSchema = z.object({
  run_id: z.string(),
  app_name: z.string(),
  mode: z.enum(["sync", "async"]),
  method: z.string(),
  path: z.string(),
  status_code: z.number().int(),
  duration_ms: z.number(),
  ttfb_ms: z.number().nullable(),
  bytes_in: z.number().int(),
  bytes_out: z.number().int(),
  caller: z.string(),
  webhook: z.object({ delivery_id: z.string(), status: z.string() }).nullable(),
  created_at: z.string(),
});
export const FiguresSchema = z.object({
  runs: z.number().int(),
  status_2xx: z.number().int(),
  status_4xx: z.number().int(),
  status_5xx: z.number().int(),
  timeouts: z.number().int(),
  p50_ms: z.number().nullable(),
  p95_ms: z.number().nullable(),
  p99_ms: z.number().nullable(),
  bytes_in: z.number().int(),
  bytes_out: z.number().int(),
  deliveries_delivered: z.number().int(),
  deliveries_failed: z.number().int(),
});
export const UsageSchema = z.object({ interval: z.enum(["minute", "hour", "day"]), series: z.array(FiguresSchema.extend({ start: z.string() })), totals: FiguresSchema });
export const ReceiverSchema = z.object({
  origin: z.string(),
  delivered: z.number().int(),
  failed: z.number().int(),
  retried_share: z.number(),
  p95_run_to_received_ms: z.number().nullable(),
  last_failure: z.object({ at: z.string(), reason: z.string() }).nullable(),
});

export type RunRecord = z.infer<typeof RunRecordSchema>;
export type Usage = z.infer<typeof UsageSchema>;
export type UsageFigures = z.infer<typeof FiguresSchema>;
export type Receiver = z.infer<typeof ReceiverSchema>;
export type RunRecordList = { data: RunRecord[]; next_cursor: string | null };
export type ReceiverList = { data: Receiver[] };
