import { log } from "../platform/log";
import { acceptInLane, type DeliveryMessage, laneName, queueMessageOf } from "./message";

/**
 * How long the run's side waits for a lane to take a delivery before it sends it through the queue
 * instead. A lane answers in milliseconds (one SQLite insert); past this it is overloaded or being
 * moved, and the queue will hand the delivery to it later. A lane that takes it after all, late, gets
 * it twice: the second copy adds nothing (the lane keeps each delivery once; D1's claim refuses an
 * attempt of a settled one).
 */
export const HAND_TO_LANE_TIMEOUT_MS = 5_000;

/** Where a delivery went: straight to its lane, or into the queue (whose consumer hands it to the lane). */
export type HandedVia = "lane" | "queue";

/** `work`, or an error once `ms` passed without its answer. */
async function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Hands a delivery whose row exists to its lane (lane.ts `accept`), which stores it in its SQLite
 * storage before the call returns: from then on the delivery survives the runtime's restart (the
 * lane's alarm takes it up), as it would in the queue, and its first attempt starts at once rather
 * than after the queue's batch wait (`max_batch_timeout`, 1 s). When the lane cannot be reached (an
 * error, an overloaded object, no answer within HAND_TO_LANE_TIMEOUT_MS), the delivery goes to the
 * queue, whose consumer hands it to the lane as before; only when both fail does this throw.
 *
 * Platform limits relied on: one Durable Object call is one subrequest of the invocation (the queue
 * send it replaces was one too); the message is the queue's (a large body waits in R2), so what a
 * lane stores stays within its 2 MB row.
 */
export async function handMessageToLane(env: Env, message: DeliveryMessage): Promise<HandedVia> {
  try {
    // A full lane (LaneFullError) too: the queue's consumer settles the delivery `receiver_backlog_full`.
    await within(acceptInLane(env, laneName(message), [message]), HAND_TO_LANE_TIMEOUT_MS);
    return "lane";
  } catch (error) {
    log("warn", "webhook delivery handed to the queue: its lane could not take it", {
      delivery_id: message.id,
      project_id: message.projectId,
      error,
    });
  }
  await env.WEBHOOK_QUEUE.send(queueMessageOf(message), { contentType: "json" });
  return "queue";
}
