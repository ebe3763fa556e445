import { parse } from "smol-toml";
import { describe, expect, it } from "vitest";
import { CHECKS_PER_QUEUE_BATCH } from "../../../src/domains/cron";
import { CRONS, QUEUES } from "../../../src/platform/triggers";
import wranglerToml from "../../../wrangler.toml?raw";

interface Queues {
  producers?: { binding: string; queue: string }[];
  consumers?: { queue: string; max_batch_size?: number }[];
}
interface Wrangler {
  queues?: Queues;
  triggers?: { crons?: string[] };
  env?: Record<string, { queues?: Queues; triggers?: { crons?: string[] } }>;
}

const config = parse(wranglerToml) as unknown as Wrangler;

// The subrequest budget of src/domains/cron.ts holds only if each consumer batch is at most
// CHECKS_PER_QUEUE_BATCH domains; the cron sends through the DOMAIN_QUEUE binding.
describe.each([
  ["local", config],
  ["production", config.env?.production ?? {}],
])("wrangler.toml (%s): domain validation wiring", (_name, section) => {
  it("binds DOMAIN_QUEUE to the domain-validations queue, consumed in batches the budget allows", () => {
    expect(section.queues?.producers).toContainEqual({ binding: "DOMAIN_QUEUE", queue: QUEUES.domainValidations });
    const consumer = section.queues?.consumers?.find((c) => c.queue === QUEUES.domainValidations);
    expect(consumer?.max_batch_size).toBe(CHECKS_PER_QUEUE_BATCH);
  });

  it("runs the domain validation cron", () => {
    expect(section.triggers?.crons).toContain(CRONS.domainValidation);
  });
});

describe("the subrequest budget of one invocation", () => {
  it("keeps a cron run and a queue batch within the Workers Free limit", async () => {
    const c = await import("../../../src/domains/cron");
    const cron =
      1 +
      Math.ceil(c.MAX_CLAIMS_PER_CRON / c.SEND_BATCH_LIMIT) +
      c.INLINE_CHECKS_PER_CRON * c.SUBREQUESTS_PER_CHECK +
      1 +
      c.CERTIFICATE_REFRESHES_PER_CRON * 3 +
      1; // + the expiry batch
    const queue = c.CHECKS_PER_QUEUE_BATCH * (1 + c.SUBREQUESTS_PER_CHECK);
    expect(cron).toBeLessThanOrEqual(c.SUBREQUEST_LIMIT);
    expect(queue).toBeLessThanOrEqual(c.SUBREQUEST_LIMIT);
  });
});
