import { createExecutionContext, createMessageBatch, createScheduledController, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { CHECKS_PER_QUEUE_BATCH } from "../src/domains/cron";
import { type DnsResolver, ResolverError } from "../src/domains/dns";
import type { ValidationMessage } from "../src/domains/validation-message";
import type { Deps } from "../src/platform/deps";
import { CRONS, QUEUES } from "../src/platform/triggers";
import { createWorker } from "../src/worker";
import { noerror, nxdomain, rr, TARGET, uniqueLabel } from "./domains";
import { client, testDeps } from "./helpers";

type Dns = "ok" | "wrong" | "down";

/**
 * A gateway with a fake clock, a resolver whose answers a test sets per name (anything unset is
 * NXDOMAIN), and the domain-validation queue captured so the test runs the consumer itself.
 */
export function world(overrides: Partial<Deps> = {}) {
  const dns = new Map<string, Dns>();
  const queries: string[] = [];
  const resolver: DnsResolver = {
    async resolve(name, type) {
      queries.push(`${name} ${type}`);
      const state = dns.get(name);
      if (state === "down") throw new ResolverError("the resolver answered SERVFAIL");
      if (state === "ok") return noerror(rr(name, "CNAME", TARGET));
      if (state === "wrong") return noerror(rr(name, "CNAME", "elsewhere.example"));
      return nxdomain;
    },
  };
  const api = client({ resolver: () => resolver, ...overrides });
  const worker = createWorker(testDeps({ now: api.clock.now, resolver: () => resolver, ...overrides }));
  const sent: ValidationMessage[] = [];
  const queue = {
    sendBatch: async (batch: { body: ValidationMessage }[]) => void sent.push(...batch.map((m) => m.body)),
  };
  const testEnv = { ...env, DOMAIN_QUEUE: queue as unknown as Queue<unknown> };

  /** One cron run; by default the domain cron, scheduled for the clock's time (a late run passes an earlier one). */
  async function cron(run: { scheduledTime?: number; cron?: string } = {}) {
    const ctx = createExecutionContext();
    await worker.scheduled(
      createScheduledController({
        cron: run.cron ?? CRONS.domainValidation,
        scheduledTime: run.scheduledTime ?? api.clock.now().getTime(),
      }),
      testEnv,
      ctx,
    );
  }
  /** Delivers what the cron queued, in batches of the configured size, as the Queues service would. */
  async function drainQueue() {
    const results = [];
    while (sent.length > 0) {
      const messages = sent
        .splice(0, CHECKS_PER_QUEUE_BATCH)
        .map((body, i) => ({ id: `m-${uniqueLabel()}-${i}`, timestamp: api.clock.now(), attempts: 1, body }));
      const batch = createMessageBatch<unknown>(QUEUES.domainValidations, messages);
      const ctx = createExecutionContext();
      await worker.queue(batch, testEnv, ctx);
      results.push(await getQueueResult(batch, ctx));
    }
    return results;
  }
  const checksOf = (name: string) => queries.filter((q) => q === `${name} A`).length;
  return { api, dns, queries, sent, cron, drainQueue, checksOf };
}

export const HALF_HOUR = 30 * 60 * 1000;

export async function read(api: ReturnType<typeof client>, seed: { projectId: string; token: string }, name: string) {
  return (
    await api.json<Record<string, unknown> & { status: string; last_error: { code: string } | null }>(
      `/v2/projects/${seed.projectId}/domains/${name}`,
      { token: seed.token },
    )
  ).body;
}
