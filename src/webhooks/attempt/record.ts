import { log } from "../../platform/log";
import { recordAttempt } from "../store";
import type { DeliveryContext } from "./context";
import type { SentAttempt } from "./send";

/** Writes of an attempt's outcome tried before the lane gives the delivery back to its backlog. */
export const RECORD_TRIES = 2;

/** The third step: whether D1 took the attempt's record. */
export interface RecordedAttempt {
  sent: SentAttempt;
  recorded: boolean;
}

/** Records `sent` (one INSERT, its trigger settles the delivery), tried RECORD_TRIES times. */
export async function record(ctx: DeliveryContext, deliveryId: string, sent: SentAttempt): Promise<RecordedAttempt> {
  const row = {
    deliveryId,
    attempt: sent.attempt,
    at: sent.at,
    statusCode: sent.statusCode,
    error: sent.error,
    durationMs: sent.durationMs,
    outcome: sent.outcome,
  };
  for (let tries = 1; ; tries++) {
    try {
      await recordAttempt(ctx.db, row, ctx.writes);
      return { sent, recorded: true };
    } catch (error) {
      log("error", "webhook attempt not recorded", { delivery_id: deliveryId, attempt: sent.attempt, tries, error });
      if (tries >= RECORD_TRIES) return { sent, recorded: false };
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
