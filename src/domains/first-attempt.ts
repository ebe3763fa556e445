import type { Domain } from "../db/schema";
import { validationMessage } from "./validation-message";
import { log } from "../platform/log";

/**
 * The first automatic attempt comes through the domain-validations queue, a few seconds after the
 * domain is created, instead of waiting up to 30 minutes for the cron's next tick or running inside
 * the caller's request. A queue message per creation costs one subrequest and runs within seconds;
 * a per-minute cron would cost 1,440 mostly idle invocations a day. The delay lets a record created
 * while the user reads the answer be seen by that first attempt, and stays well within the minute
 * a first attempt should take, Queues' own delivery latency included.
 */
export const FIRST_ATTEMPT_DELAY_S = 15;

/**
 * Sent in `waitUntil` (at most 30 s after the client hangs up, far more than one send needs). If the
 * send fails, nothing is lost: the domain's `next_check_at` is the cron's next tick, which tries it.
 */
export async function sendFirstAttempt(env: Env, domain: Domain, now: Date): Promise<void> {
  try {
    await env.DOMAIN_QUEUE.send(validationMessage(domain.id, now.getTime()), {
      delaySeconds: FIRST_ATTEMPT_DELAY_S,
    });
  } catch (error) {
    log("warn", "first validation attempt not queued; the next cron tick makes it", {
      domain: domain.hostname,
      project_id: domain.projectId,
      error,
    });
  }
}
