import { z } from "zod";

/**
 * The message an accepted async run puts on the `async-runs` queue (`accept.ts` sends it, `consumer.ts`
 * takes it): a contract between two invocations, versioned, holding ids only (the request waits with
 * the run in D1 or R2). Fields in snake_case, as every queue's. A change here is a change of what is
 * already waiting in the queue (at-least-once: an old message may reach new code): add optional
 * fields, bump `v` for anything else and keep reading the old version.
 */
export const asyncRunMessageSchema = z.object({
  v: z.literal(1),
  run_id: z.string().min(1),
  // Read leniently: the consumer needs only the run's id (the run's row holds the rest).
  project_id: z.string().optional(),
});
export type AsyncRunMessage = z.infer<typeof asyncRunMessageSchema>;

/** The message `body` holds, or `null` for a body that is not one. */
export const asyncRunMessageOf = (body: unknown): AsyncRunMessage | null => {
  const parsed = asyncRunMessageSchema.safeParse(body);
  return parsed.success ? parsed.data : null;
};
