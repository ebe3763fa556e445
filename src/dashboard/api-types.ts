import type { z } from "@hono/zod-openapi";
import type {
  ReceiverDetailSchema,
  ReceiverHealthSchema,
  RunRecordList as RunRecordListSchema,
  RunRecordSchema,
  UsageSchema,
} from "../usage/routes";

/** What the dashboard reads from the usage API: the API's own response schemas, inferred, never copied. */
export type RunRecordItem = z.infer<typeof RunRecordSchema>;
export type RunRecordPage = z.infer<typeof RunRecordListSchema>;
export type Usage = z.infer<typeof UsageSchema>;
export type UsageTotals = Usage["totals"];
export type Receiver = z.infer<typeof ReceiverHealthSchema>;
export type ReceiverList = { data: Receiver[] };
export type ReceiverDetail = z.infer<typeof ReceiverDetailSchema>;
