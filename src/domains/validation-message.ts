/**
 * The message of the `domain-validations` queue: the cron (and a new domain's first attempt) sends it,
 * `validation-queue.ts` takes it. A contract between invocations, in a file of its own.
 */
export interface ValidationMessage {
  domain_id: string;
  /** When the cron claimed it (ms): a redelivered message whose domain was checked since is skipped. */
  claimed_at: number;
}

export const isValidationMessage = (body: unknown): body is ValidationMessage =>
  typeof body === "object" &&
  body !== null &&
  typeof (body as ValidationMessage).domain_id === "string" &&
  typeof (body as ValidationMessage).claimed_at === "number";
