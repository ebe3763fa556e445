import { z } from "@hono/zod-openapi";

/**
 * The usage API's answers as the dashboard reads them: `z.infer` of the API's response schemas.
 * STAND-IN until src/usage/routes.ts lands: the same shapes, to be replaced by its exports.
 */
export const RunRecordSchema = z.object({
  run_id: z.string(),
  app_name: z.string(),
  mode: z.enum(["sync", "async"]),
  method: z.string(),
  path: z.string(),
  status_code: z.number().int(),
  timed_out: z.boolean(),
  hung_up: z.boolean(),
  duration_ms: z.number().int(),
  ttfb_ms: z.number().int().nullable(),
  bytes_in: z.number().int(),
  bytes_out: z.number().int(),
  caller: z.string(),
  webhook: z.object({ delivery_id: z.string().nullable(), status: z.enum(["pending", "delivered", "failed"]), attempts: z.number().int() }).nullable(),
  status_url: z.string().nullable(),
  request_id: z.string(),
  created_at: z.string(),
});
export const RunRecordList = z.object({ data: z.array(RunRecordSchema), next_cursor: z.string().nullable(), sampled: z.boolean() });
const Figures = {
  runs: z.number().int(),
  status_2xx: z.number().int(),
  status_4xx: z.number().int(),
  status_5xx: z.number().int(),
  timeouts: z.number().int(),
  p50_ms: z.number().int().nullable(),
  p95_ms: z.number().int().nullable(),
  p99_ms: z.number().int().nullable(),
  bytes_in: z.number().int(),
  bytes_out: z.number().int(),
  deliveries_delivered: z.number().int(),
  deliveries_failed: z.number().int(),
};
export const UsageSchema = z.object({
  interval: z.enum(["minute", "hour", "day"]),
  from: z.string(),
  to: z.string(),
  series: z.array(z.object({ start: z.string(), ...Figures })),
  totals: z.object(Figures),
  percentiles: z.enum(["exact", "histogram"]),
  sampled: z.boolean(),
});
export const ReceiverHealthSchema = z.object({
  origin: z.string(),
  delivered: z.number().int(),
  failed: z.number().int(),
  pending: z.number().int(),
  retried_share: z.number(),
  p95_run_to_received_ms: z.number().int().nullable(),
  last_failure: z.object({ at: z.string(), reason: z.string() }).nullable(),
});
