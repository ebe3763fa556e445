import { eq } from "drizzle-orm";
import { domains } from "../db/schema";
import { eachLimited } from "../platform/concurrency";
import type { Scope } from "../platform/scope";
import { CHECK_CONCURRENCY } from "./cron";
import { validateDomain } from "./validate";
import { log } from "../platform/log";
import { validationMessageOf } from "./validation-message";

/** The domain-validation queue consumer: the checks one cron run had more of than it could do itself. */
export async function domainValidationConsumer(batch: MessageBatch<unknown>, s: Scope): Promise<void> {
  await eachLimited(batch.messages, CHECK_CONCURRENCY, async (message) => {
    const body = validationMessageOf(message.body);
    if (body === null) {
      log("error", "malformed domain validation message dropped", { message_id: message.id });
      message.ack();
      return;
    }
    const { domain_id, claimed_at } = body;
    try {
      const [domain] = await s.db.select().from(domains).where(eq(domains.id, domain_id)).limit(1);
      const stale = !domain || domain.status !== "pending" || (domain.lastCheckedAt?.getTime() ?? 0) >= claimed_at;
      if (!stale) await validateDomain(s, domain);
      message.ack();
    } catch (error) {
      log("error", "domain check failed; retrying", { domain_id, error });
      message.retry({ delaySeconds: 30 });
    }
  });
}
