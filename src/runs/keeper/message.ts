import type { CallLimits } from "../context";

/**
 * The contract between the Worker and a waited run's keeper (`RunKeeper`, a Durable Object per project
 * and shard of run ids): an RPC, `run(appRequest, kept)`, whose answer is `KeeperAnswer`, and
 * `callerLeft(runId)`. The app request crosses as a
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
  acceptHeader: string | null;
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
  /** Bytes of the caller's body (a waited run's body is read whole before it is handed over). */
  bytesIn: number;
  /**
   * The caller's `Idempotency-Key` and the hash of the request it stands for (`requestHashOf`); absent
   * or `null` without one. The run id is in the key's shard (shard.ts), so every retry reaches this keeper.
   */
  key?: { value: string; requestHash: string } | null;
}

/**
 * Why a keeper did not take a run (docs/runs.md#the-keeper): it holds `KEEPER_RUNS_MAX` runs (`runs`)
 * or its bytes of request bodies (`bytes`); the caller holds its share of them (`caller`); or the
 * handed-over runs fill their part and this caller has one of them (`handed_over`).
 */
export type BusyReason = "runs" | "bytes" | "caller" | "handed_over";

/** The keeper's answer to the Worker: the caller's answer, or the run handed over. */
export type KeeperAnswer =
  /** The app's answer passed through, within the wait: exactly what a synchronous run answers, plus `Preference-Applied`. */
  | { kind: "answered"; response: Response }
  /**
   * A whole answer within the wait (the envelope, or the gateway's problem when the app gave none): its
   * parts as plain values, so it crosses without a stream; the Worker makes the response of them.
   */
  | { kind: "whole"; answer: WholeAnswer }
  /** The wait ended first, or the caller left: the run's row is written, it goes on; the caller gets 202. */
  | { kind: "handed_over"; status: "running" }
  /** The keeper may not take the run now (`BusyReason`): it was not taken, nothing was called. */
  | { kind: "busy"; reason: BusyReason }
  /**
   * A retry under a key that names run `runId` (its own run id was never used): `answer` is what it gets
   * (`Joined`), or the run's state when it has ended (`status`), or `reused` for a different request.
   */
  | { kind: "keyed"; runId: string; answer: KeyedAnswer };

/** What a request under a key that already names a run gets: never a second call of the app. */
export type KeyedAnswer =
  /** The run's stored answer: it ended within this request's wait. */
  | { kind: "whole"; answer: WholeAnswer }
  /** The run is handed over (running, or ended and stored with `status`): the run resource, 202. */
  | { kind: "run"; status: "running" | "succeeded" | "failed" }
  /** Its answer went to the request that waited for it, and is not kept. */
  | { kind: "answered" }
  /** The key was used for a different request (method, app, path, query, webhook or body). */
  | { kind: "reused" };

/** A whole answer's parts: what `responseOf` makes the caller's response of. */
export interface WholeAnswer {
  status: number;
  text: string;
  contentType: string;
  /** Headers beyond the content's own (`Retry-After`, a problem's). */
  headers: Record<string, string>;
}
