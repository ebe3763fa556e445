import { z } from "zod";
import { outcomePath, type RunMode, type RunStart } from "./outcome";

/**
 * The admitted run: what admission knows of a run once it has let it through, as one value. Admission
 * makes it once (admit.ts `admitRequest`), and it travels as it is: the Worker runs a synchronous run
 * or a WebSocket from it, a waited run's keeper takes it over RPC (wait/keeper.ts), an async run's
 * store keeps it with the run (`async_runs.admitted`) and its queue consumer executes it as admitted,
 * never reading the app's deployment again. Plain values only (it crosses to Durable Objects and into
 * storage), the webhook's secret sealed; the caller's body travels beside it in the app's request.
 * A change here changes what waits in storage: add optional fields, or bump `v` and keep reading the old.
 */

/** A waited or async run's `Idempotency-Key` and the hash of the request it stands for (`requestHashOf`). */
export const runKeySchema = z.object({ value: z.string().min(1), requestHash: z.string() });
export type RunKey = z.infer<typeof runKeySchema>;

/**
 * How the caller asked for the run: `sync` (the answer on the same connection), `wait` (`Prefer:
 * wait=N`: the answer within N seconds, else the run handed over), `async` (`?async=true`: 202 at
 * once), `websocket` (an upgrade, passed through). A key belongs to the modes that keep a run under it.
 */
export const admittedModeSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("sync") }),
  z.object({ kind: z.literal("wait"), seconds: z.number().int().positive(), key: runKeySchema.nullable() }),
  z.object({ kind: z.literal("async"), key: runKeySchema.nullable() }),
  z.object({ kind: z.literal("websocket") }),
]);
export type AdmittedMode = z.infer<typeof admittedModeSchema>;

/** A webhook secret sealed under the run's id (webhooks/secret-box.ts): never in clear once admitted. */
const sealedSchema = z.object({ iv: z.string(), ct: z.string() });

export const admittedRunSchema = z.object({
  v: z.literal(1),
  runId: z.string().min(1),
  projectId: z.string().min(1),
  appName: z.string().min(1),
  /** The app's path under the app (`run`, `v1/chat/completions`), no query: the outcome's `path`. */
  appPath: z.string(),
  method: z.string().min(1),
  /** Who ran it (`sa:<id>`, `user:<id>`, `jwt:<subject>`, `admin`): alone reads it, cancels it, re-uses its key. */
  caller: z.string(),
  /** The request that admitted it (`X-Request-Id`): its problems quote it. */
  requestId: z.string(),
  /** The app's runtime at admission: how its answer is formed (`cortex`: the envelope), whenever it is called. */
  runtime: z.enum(["cortex", "custom"]),
  /** The caller's `Accept`, as the app gets it (whether the caller asked for a stream). */
  acceptHeader: z.string().nullable(),
  /** How long the app may take to answer (its headers) and stay silent mid-stream, in ms. */
  limits: z.object({ headersMs: z.number().int().positive(), idleMs: z.number().int().positive() }),
  /** Epoch ms on the service's clock at acceptance: the wait and the deadline count from it. */
  acceptedAt: z.number(),
  /** `Cancel-After`: the deadline in ms after acceptance; `null` for none. */
  cancelAfterMs: z.number().int().nonnegative().nullable(),
  /** `webhookEndpoint`, and `X-Webhook-Secret` sealed under the run id; `null` without a webhook. */
  webhook: z.object({ endpoint: z.string(), secret: sealedSchema.nullable() }).nullable(),
  /** Bytes of the caller's body read whole at admission (a streamed body is counted as it flows). */
  bytesIn: z.number().int().nonnegative(),
  mode: admittedModeSchema,
});
export type AdmittedRun = z.infer<typeof admittedRunSchema>;

/** An admitted run asked in mode `K`. */
export type AdmittedRunIn<K extends AdmittedMode["kind"]> = AdmittedRun & { mode: Extract<AdmittedMode, { kind: K }> };

/** `run`, checked against the contract (a stored or received run from another version of the code); `null` when it is not one. */
export const admittedRunOf = (value: unknown): AdmittedRun | null => {
  const parsed = admittedRunSchema.safeParse(value);
  return parsed.success ? parsed.data : null;
};

/** Whether `run` was asked in mode `kind`. */
export const isMode = <K extends AdmittedMode["kind"]>(run: AdmittedRun, kind: K): run is AdmittedRunIn<K> =>
  run.mode.kind === kind;

/** The run's mode as its outcome names it: a WebSocket is a synchronous run's pass-through. */
export const outcomeMode = (mode: AdmittedMode): RunMode => (mode.kind === "websocket" ? "sync" : mode.kind);

/** The admitted run as its outcome starts (`RunStart`). */
export const startOfAdmitted = (run: AdmittedRun): RunStart => ({
  runId: run.runId,
  projectId: run.projectId,
  appName: run.appName,
  path: outcomePath(run.appPath),
  method: run.method,
  mode: outcomeMode(run.mode),
  caller: run.caller,
  requestId: run.requestId,
  acceptedAt: run.acceptedAt,
});
