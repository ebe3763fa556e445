/**
 * Cron expressions and queue names, shared by the handlers and by the test that checks
 * `wrangler.toml` configures exactly these.
 */
export const CRONS = {
  domainValidation: "*/30 * * * *",
  /** Async runs: interrupted and stale ones settled, results past retention purged. */
  asyncRuns: "*/5 * * * *",
  /** The retention purge of the delivery log and of async runs, in slices until caught up (src/retention.ts). */
  retention: "* * * * *",
} as const;

export const QUEUES = {
  webhookDeliveries: "webhook-deliveries",
  /** Where `webhook-deliveries` puts a message it gave up on (`dead_letter_queue` in wrangler.toml). */
  webhookDeadLetters: "webhook-deliveries-dlq",
  domainValidations: "domain-validations",
  asyncRuns: "async-runs",
  /** Where `async-runs` puts a message it gave up on: its run is settled as its last redelivery would (src/runs/async/consumer.ts). */
  asyncRunDeadLetters: "async-runs-dlq",
  /** Run records of several projects flushed together by one isolate (src/usage/buffer.ts). */
  usageRecords: "usage-records",
} as const;
