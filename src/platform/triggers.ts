/**
 * Cron expressions and queue names, shared by the handlers and by the test that checks
 * `wrangler.toml` configures exactly these.
 */
export const CRONS = {
  domainValidation: "*/30 * * * *",
} as const;

export const QUEUES = {
  webhookDeliveries: "webhook-deliveries",
  /** Where `webhook-deliveries` puts a message it gave up on (`dead_letter_queue` in wrangler.toml). */
  webhookDeadLetters: "webhook-deliveries-dlq",
  domainValidations: "domain-validations",
} as const;
