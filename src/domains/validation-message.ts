import { z } from "zod";

/**
 * The message of the `domain-validations` queue: the cron (and a new domain's first attempt) sends it,
 * `validation-queue.ts` takes it. A contract between invocations, versioned as every queue's message,
 * fields in snake_case. At-least-once: a message queued by older code may reach new code, so every
 * version sent is read (the first carried no `v`); add optional fields, or a new version for anything else.
 */
const fields = {
  domain_id: z.string().min(1),
  /** When the cron claimed it (ms): a redelivered message whose domain was checked since is skipped. */
  claimed_at: z.number(),
};
const validationMessageV1 = z.object({ v: z.literal(1), ...fields });
export type ValidationMessage = z.infer<typeof validationMessageV1>;

/** The message that asks for a check of domain `domainId`, claimed at `claimedAt` (ms). */
export const validationMessage = (domainId: string, claimedAt: number): ValidationMessage => ({
  v: 1,
  domain_id: domainId,
  claimed_at: claimedAt,
});

/** Read as the current version: version 1, and the unversioned messages queued before it. */
export const validationMessageSchema = z.union([
  validationMessageV1,
  z
    .object({ v: z.undefined().optional(), ...fields })
    .transform((m): ValidationMessage => validationMessage(m.domain_id, m.claimed_at)),
]);

/** The message `body` holds, or `null` for a body that is not one. */
export const validationMessageOf = (body: unknown): ValidationMessage | null => {
  const parsed = validationMessageSchema.safeParse(body);
  return parsed.success ? parsed.data : null;
};
