import { log } from "../../platform/log";
import { retry } from "../../platform/retry";
import { insertAttempt } from "../store";
import type { DeliveryContext } from "./context";
import type { DeliveryMessage } from "../message";
import type { SentAttempt } from "./send";

/** Writes of an attempt's outcome tried before the lane gives the delivery back to its backlog. */
export const RECORD_TRIES = 2;

/** The third step: whether D1 took the attempt's record. */
export interface WrittenAttempt {
  sent: SentAttempt;
  recorded: boolean;
}

/** Records `sent` (one INSERT, its trigger settles the delivery), tried RECORD_TRIES times. */
export async function writeAttempt(
  ctx: DeliveryContext,
  delivery: Pick<DeliveryMessage, "projectId" | "id">,
  sent: SentAttempt,
): Promise<WrittenAttempt> {
  const deliveryId = delivery.id;
  const row = {
    deliveryId,
    attempt: sent.attempt,
    at: sent.at,
    statusCode: sent.statusCode,
    error: sent.error,
    durationMs: sent.durationMs,
    outcome: sent.outcome,
  };
  try {
    await retry(
      async (tries) => {
        try {
          const log = ctx.log(delivery);
          await insertAttempt(log.db, row, log.writes);
        } catch (error) {
          log("error", "webhook attempt not recorded", {
            delivery_id: deliveryId,
            attempt: sent.attempt,
            tries,
            error,
          });
          throw error;
        }
      },
      { tries: RECORD_TRIES, sleep: ctx.deps.sleep, pauseMs: () => 50 },
    );
    return { sent, recorded: true };
  } catch {
    return { sent, recorded: false };
  }
}
