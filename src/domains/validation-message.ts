import { z } from "zod";

/**
 * The message of the `domain-validations` queue: the cron (and a new domain's first attempt) sends it,
 * `validation-queue.ts` takes it. A contract between invocations, in a file of its own; fields in
 * snake_case, as every queue's. Add optional fields only: a message already queued may reach new code.
 */
export const validationMessageSchema = z.object({
  domain_id: z.string().min(1),
  /** When the cron claimed it (ms): a redelivered message whose domain was checked since is skipped. */
  claimed_at: z.number(),
});
export type ValidationMessage = z.infer<typeof validationMessageSchema>;

/** The message `body` holds, or `null` for a body that is not one. */
export const validationMessageOf = (body: unknown): ValidationMessage | null => {
  const parsed = validationMessageSchema.safeParse(body);
  return parsed.success ? parsed.data : null;
};
