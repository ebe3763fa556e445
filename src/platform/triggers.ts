/**
 * Cron expressions and queue names, shared by the handlers and by the test that checks
 * `wrangler.toml` configures exactly these.
 */
export const CRONS = {
  domainValidation: "*/30 * * * *",
} as const;

export const QUEUES = {
  webhookDeliveries: "webhook-deliveries",
  domainValidations: "domain-validations",
} as const;
