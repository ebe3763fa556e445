import { type AdmittedRun, admittedRunOf } from "../admitted";

/**
 * The contract between the Worker and a waited run's keeper (`RunKeeper`, a Durable Object per project
 * and shard of run ids): an RPC, `run(appRequest, run, sentAfterMs)`, whose answer is `KeeperAnswer`,
 * and `callerLeft(runId)`. The app request crosses as a `Request` (its body streamed); the run as the
 * admitted run (admitted.ts), checked on arrival; `sentAfterMs` is the Worker's wall milliseconds from
 * acceptance to the moment it sent the run (the wait and the deadline count from acceptance).
 */

/**
 * A waited run as keepers stored it before the admitted run (`v: 1` with `wait` beside its fields):
 * records of runs in flight at an upgrade are read as admitted runs, so their keeper can still end them.
 */
interface KeptRunV1 {
  v: 1;
  runId: string;
  projectId: string;
  appName: string;
  path: string;
  method: string;
  caller: string;
  requestId: string;
  runtime: "cortex" | "custom";
  acceptHeader: string | null;
  limits: { headersMs: number; idleMs: number };
  acceptedAt: number;
  sentAfterMs: number;
  wait: number;
  cancelAfterMs: number | null;
  bytesIn: number;
  key?: { value: string; requestHash: string } | null;
}

/**
 * What a Worker of the code before hands a keeper (`run(appRequest, kept)`): a `KeptRunV1` with its
 * webhook's secret in clear, sealed here under the run id (`seal`); `null` for anything else.
 */
export async function admittedOfV1(
  kept: unknown,
  seal: (runId: string, secret: string) => Promise<{ iv: string; ct: string }>,
): Promise<{ run: AdmittedRun; sentAfterMs: number } | null> {
  const admitted = admittedRunOf(kept);
  if (admitted !== null) return { run: admitted, sentAfterMs: 0 };
  const old = kept as (Partial<KeptRunV1> & { webhook?: { endpoint: string; secret?: unknown } | null }) | null;
  const run = keptRunOf(kept);
  if (run === null || old === null) return null;
  const webhook = old.webhook
    ? {
        endpoint: old.webhook.endpoint,
        secret: typeof old.webhook.secret === "string" ? await seal(run.runId, old.webhook.secret) : null,
      }
    : null;
  return { run: { ...run, webhook }, sentAfterMs: typeof old.sentAfterMs === "number" ? old.sentAfterMs : 0 };
}

/** A run a keeper's record holds: an admitted run, or one stored before it (`KeptRunV1`); `null` for neither. */
export function keptRunOf(stored: unknown): AdmittedRun | null {
  const run = admittedRunOf(stored);
  if (run !== null) return run;
  const old = stored as Partial<KeptRunV1> | null;
  if (old?.v !== 1 || typeof old.wait !== "number" || typeof old.runId !== "string") return null;
  return admittedRunOf({
    v: 1,
    runId: old.runId,
    projectId: old.projectId,
    appName: old.appName,
    appPath: old.path,
    method: old.method,
    caller: old.caller,
    requestId: old.requestId,
    runtime: old.runtime,
    acceptHeader: old.acceptHeader,
    limits: old.limits,
    acceptedAt: old.acceptedAt,
    cancelAfterMs: old.cancelAfterMs,
    // The old record kept no webhook: its delivery is the record's own.
    webhook: null,
    bytesIn: old.bytesIn,
    mode: { kind: "wait", seconds: Math.max(1, old.wait), key: old.key ?? null },
  });
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
