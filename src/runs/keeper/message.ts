import type { CallLimits } from "../context";

/**
 * The contract between the Worker and a waited run's keeper (`RunKeeper`, one Durable Object per run
 * id): an RPC, `run(appRequest, kept)`, whose answer is `KeeperAnswer`. The app request crosses as a
 * `Request` (its body streamed); everything else as the plain values below, versioned.
 */

/** What the Worker hands the keeper beside the app request. */
export interface KeptRun {
  v: 1;
  runId: string;
  projectId: string;
  appName: string;
  /** The app's path under the app, for the run's outcome. */
  path: string;
  method: string;
  /** Who ran it (`sa:<id>`, …): the run's caller, who alone reads it once handed over. */
  caller: string;
  /** The request that started the run: its problems quote it. */
  requestId: string;
  runtime: "cortex" | "custom";
  /** The caller's `Accept`, as the app gets it. */
  accept: string | null;
  limits: CallLimits;
  /** The run's clock at acceptance (epoch ms): the keeper's moments go on from it. */
  acceptedAt: number;
  /** Wall milliseconds from acceptance to this hand-off: the wait and the deadline count from acceptance. */
  sentAfterMs: number;
  /** Seconds the caller waits (`Prefer: wait=N`) before the run is handed over. */
  wait: number;
  /** `Cancel-After` in milliseconds after acceptance; `null` for none. */
  cancelAfterMs: number | null;
  /** `webhookEndpoint` and `X-Webhook-Secret`: the secret is sealed into the delivery's record at once, never kept. */
  webhook: { endpoint: string; secret: string | undefined } | null;
  /** Bytes of the caller's body when known before it flows (read whole, or declared); `null` for a chunked upload. */
  bytesIn: number | null;
}

/** The keeper's answer to the Worker: the caller's answer, or the run handed over. */
export type KeeperAnswer =
  /** The app answered within the wait (or gave no answer): exactly what a synchronous run answers, plus `Preference-Applied`. */
  | { kind: "answered"; response: Response }
  /** The wait ended first, or the caller left: the run's row is written, it goes on; the caller gets 202. */
  | { kind: "handed_over"; status: "running" };
