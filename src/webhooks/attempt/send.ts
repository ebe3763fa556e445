import type { AttemptOutcome } from "../../db/schema";
import type { Deps } from "../../platform/deps";
import { isTimeout } from "../../platform/http";
import { classifyStatus, type AttemptVerdict, type ReceiverSays, receiverSays } from "../policy";
import type { Prepared, SignedAttempt } from "./prepare";

/** The second step: what one attempt did, as it will be recorded. */
export interface SentAttempt {
  attempt: number;
  /** When the attempt began (its claim), and when its request ended (wall clock, ms): the pause counts from there. */
  at: Date;
  endedAt: number;
  durationMs: number;
  /** The receiver's status, when it answered; otherwise `error` says why not. */
  statusCode: number | null;
  error: string | null;
  outcome: AttemptOutcome;
  /** The receiver's `Retry-After`, for the pause before the next attempt. */
  retryAfter: string | null;
  /** For the failure's log line: why the delivery ends here, when it does. */
  reason: string;
  /** The receiver said stop: 410 Gone or `webhook-delivery: disable` (its receiver is disabled), or `abort-message`. */
  says?: ReceiverSays;
}

type Unsendable = Extract<Prepared, { kind: "unsendable" }>;

/**
 * The recorded outcome of a receiver's answer, to the delivery's last attempt (`final`) or an earlier
 * one. A receiver that says stop (`says`) ends the delivery's attempts unless it took it.
 */
export function outcomeOf(
  answer: AttemptVerdict,
  final: boolean,
  says: ReceiverSays = null,
): { outcome: AttemptOutcome; reason: string } {
  if (answer === "delivered") return { outcome: "delivered", reason: "" };
  if (says === "abort-message")
    return { outcome: "failed", reason: "the receiver answered webhook-delivery: abort-message" };
  if (says === "disable") return { outcome: "failed", reason: "the receiver asked to be disabled" };
  if (answer === "permanent") return { outcome: "failed", reason: "permanent failure" };
  return final ? { outcome: "failed", reason: "attempts exhausted" } : { outcome: "retry", reason: "" };
}

/**
 * One POST of a prepared attempt. Its timeout (`timeoutMs`) starts here, when the request is sent: the
 * delivery already holds its place in its lane, so a request never times out while it waits for a
 * connection inside the runtime (which `AbortSignal.timeout` at `new Request` would allow).
 */
export async function send(
  deps: Pick<Deps, "outbound">,
  ready: SignedAttempt,
  timeoutMs: number,
): Promise<SentAttempt> {
  const controller = new AbortController();
  const started = Date.now();
  const timer = setTimeout(
    () => controller.abort(new DOMException(`No answer within ${timeoutMs} ms`, "TimeoutError")),
    timeoutMs,
  );
  const base = { attempt: ready.attempt, at: ready.at };
  try {
    const response = await deps.outbound.fetch(
      new Request(ready.url, {
        method: "POST",
        headers: ready.headers,
        body: ready.body,
        redirect: "manual",
        signal: controller.signal,
      }),
    );
    // The receiver's body is not used; release the connection.
    await response.body?.cancel().catch(() => undefined);
    const endedAt = Date.now();
    const says = receiverSays(response.status, response.headers.get("webhook-delivery"));
    return {
      ...base,
      endedAt,
      durationMs: endedAt - started,
      statusCode: response.status,
      error: null,
      retryAfter: response.headers.get("Retry-After"),
      says,
      ...outcomeOf(classifyStatus(response.status), ready.final, says),
    };
  } catch (error) {
    const endedAt = Date.now();
    const kind = controller.signal.aborted || isTimeout(error) ? "timeout" : "connection_failed";
    return {
      ...base,
      endedAt,
      durationMs: endedAt - started,
      statusCode: null,
      error: kind,
      retryAfter: null,
      ...outcomeOf("retry", ready.final),
    };
  } finally {
    clearTimeout(timer);
  }
}

/** The attempt of a claimed delivery that had nothing to send, as it is recorded. */
export function unsent(unsendable: Unsendable): SentAttempt {
  const outcome: AttemptOutcome = unsendable.final ? "failed" : "retry";
  return {
    attempt: unsendable.attempt,
    at: unsendable.at,
    endedAt: Date.now(),
    durationMs: 0,
    statusCode: null,
    error: unsendable.error,
    retryAfter: null,
    outcome,
    reason: unsendable.reason,
  };
}
