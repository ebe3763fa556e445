import { DurableObject } from "cloudflare:workers";
import type { Deps } from "../../platform/deps";
import { ApiError, problemBody } from "../../platform/errors";
import { log } from "../../platform/log";
import { createScope, type Scope } from "../../platform/scope";
import { enqueuePending, type PendingDelivery, recordPending } from "../../webhooks/enqueue";
import { runMeta } from "../call";
import type { RunOutcome } from "../outcome";
import { endInterrupted } from "./handed-over";
import { keepCall, type KeptCall } from "./kept-call";
import type { KeeperAnswer, KeptRun } from "./message";

/**
 * A waited run's keeper: one Durable Object per run id (`RUN_KEEPER`), the owner of that run's app
 * call from before it is made to its end, whoever waits for it. The Worker hands it the app request
 * (`run`); the keeper records "called" in its storage before the call goes out, makes it
 * (`kept-call.ts`), and answers the Worker with the app's answer or, past the wait, the hand-over.
 *
 * Exactly one call, whatever fails. Platform facts this rests on:
 * - A Durable Object is kept in memory while it serves a request or runs its alarm handler; an
 *   outbound `fetch` alone does not keep it (it may be evicted once no request is in progress). So the
 *   keeper's alarm holds the run: armed before the call, it runs while the call does (15 minutes of
 *   wall time per alarm invocation; re-armed for a longer call).
 * - Storage writes are confirmed before any outgoing message leaves the object (the output gate): the
 *   "called" row is durable before the app's request is sent.
 * - An alarm runs at least once, and is retried when its handler throws. An alarm that finds "called"
 *   in storage but no call in memory belongs to an object that was reset mid-call (evicted, restarted,
 *   `ctx.abort()`): the run ends `interrupted` and the app is never called again for it.
 * - A Durable Object makes at most 6 outbound connections at once and has 128 MB: a keeper makes one
 *   call (D1, R2 and the webhook's send come after it), and holds no more of an answer than a
 *   synchronous run does (a copy of at most 4 MiB, an envelope of at most 10 MiB).
 */

/** The alarm that holds the run fires this soon after the call starts (until then the Worker's request holds the object). */
const HOLD_FROM_MS = 5_000;
/** One alarm holds the run this long (of its 15 minutes of wall time), then hands over to the next. */
const ALARM_HOLD_MS = 14 * 60_000;

/** The keeper's storage: its one run, from "called" to its end (then the row goes). */
const SCHEMA = `CREATE TABLE IF NOT EXISTS kept_run (
  run_id TEXT PRIMARY KEY,
  phase TEXT NOT NULL CHECK (phase IN ('called', 'handed_over')),
  run TEXT NOT NULL,
  target TEXT NOT NULL,
  delivery TEXT,
  called_at INTEGER NOT NULL,
  handed_over_at INTEGER
)`;

interface Row extends Record<string, SqlStorageValue> {
  run_id: string;
  phase: "called" | "handed_over";
  run: string;
  target: string;
  delivery: string | null;
  called_at: number;
  handed_over_at: number | null;
}

/** Where a run's one outcome goes: usage's recorder, passed in by the root. */
export interface KeeperOutcomes {
  ended(scope: Scope, outcome: RunOutcome): void;
}

/** The keeper's logic, apart from the Durable Object class so that it reads as plain code. */
export class Keeper {
  readonly #sql: SqlStorage;
  #live: { runId: string; call: KeptCall } | null = null;

  constructor(
    private readonly state: DurableObjectState,
    private readonly env: Env,
    private readonly deps: Deps,
    private readonly outcomes: KeeperOutcomes,
  ) {
    this.#sql = state.storage.sql;
    this.#sql.exec(SCHEMA);
  }

  #row(): Row | null {
    return this.#sql.exec<Row>("SELECT * FROM kept_run LIMIT 1").toArray()[0] ?? null;
  }

  /**
   * Takes the run: records "called", calls the app, and answers once the caller's answer is ready or
   * the run is handed over. A keeper takes one run, once: a second `run` is refused without a call.
   */
  async run(appRequest: Request, run: KeptRun): Promise<KeeperAnswer> {
    if (this.#live !== null || this.#row() !== null) throw new Error(`The keeper of ${run.runId} has its run already.`);
    const scope = createScope(this.env, this.state, this.deps, run.requestId);
    const received = Date.now();
    const clock = (wall = Date.now()) => run.acceptedAt + run.sentAfterMs + (wall - received);
    // The delivery is on record (its secret sealed) before the app is called, as for a synchronous run.
    const pending = run.webhook
      ? await recordPending(scope, {
          projectId: run.projectId,
          appName: run.appName,
          runId: run.runId,
          endpoint: run.webhook.endpoint,
          secret: run.webhook.secret,
        })
      : null;
    const stored = { ...run, webhook: null };
    this.#sql.exec(
      "INSERT INTO kept_run (run_id, phase, run, target, delivery, called_at) VALUES (?, 'called', ?, ?, ?, ?)",
      run.runId,
      JSON.stringify(stored),
      appRequest.url,
      pending === null ? null : JSON.stringify({ ...pending, secret: undefined }),
      clock(),
    );
    await this.state.storage.setAlarm(Date.now() + HOLD_FROM_MS);
    const call = keepCall({
      scope,
      run,
      appRequest: {
        target: appRequest.url,
        method: appRequest.method,
        headers: appRequest.headers,
        body: appRequest.body,
        runId: run.runId,
      },
      pending,
      clock,
      handedOver: (at) => {
        this.#sql.exec("UPDATE kept_run SET phase = 'handed_over', handed_over_at = ?", at);
        // Nobody's request holds the object now: the alarm does, from now.
        void this.state.storage.setAlarm(Date.now());
      },
      ended: (outcome) => this.outcomes.ended(scope, outcome),
    });
    this.#live = { runId: run.runId, call };
    void call.ended.then(
      () => this.#forget(),
      async (error: unknown) => {
        // Its end could not be stored (D1 or R2 failing): the next alarm finds it and ends it `interrupted`.
        log("error", "waited run not ended by its keeper", { run_id: run.runId, error });
        this.#live = null;
        await this.state.storage.setAlarm(Date.now() + 1_000);
      },
    );
    return call.toCaller;
  }

  /** The caller hung up: while it waited, that hands the run over at once. */
  callerLeft(): void {
    this.#live?.call.callerLeft();
  }

  /** The run is over: the keeper forgets it (its row and its alarm). */
  async #forget(): Promise<void> {
    this.#live = null;
    this.#sql.exec("DELETE FROM kept_run");
    await this.state.storage.deleteAlarm();
  }

  /**
   * The alarm: holds the run while this object calls the app (up to ALARM_HOLD_MS, then the next
   * alarm), or, when the row says "called" and no call is in memory, ends the run `interrupted`.
   */
  async alarm(): Promise<void> {
    const row = this.#row();
    if (row === null) return;
    if (this.#live !== null) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const over = await Promise.race([
        this.#live.call.ended.then(
          () => true,
          () => true,
        ),
        new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ALARM_HOLD_MS))),
      ]);
      if (timer !== undefined) clearTimeout(timer);
      if (!over) await this.state.storage.setAlarm(Date.now());
      return;
    }
    await this.#interrupted(row);
  }

  /** Ends a run this object lost mid-call: stored (and delivered) as `interrupted`, never called again. */
  async #interrupted(row: Row): Promise<void> {
    const run = JSON.parse(row.run) as KeptRun;
    const scope = createScope(this.env, this.state, this.deps, run.requestId);
    const pending = row.delivery === null ? null : pendingOf(row.delivery);
    const endedAt = Math.max(this.deps.now().getTime(), row.handed_over_at ?? row.called_at);
    const message =
      "The run was interrupted: its keeper stopped while the app was working (the platform restarted or evicted it). It is not run again.";
    const error = new ApiError("run_interrupted", message, runMeta(run.runId));
    const text = JSON.stringify(problemBody(error, run.requestId));
    const ended = await endInterrupted(
      scope,
      run,
      row.target,
      pending,
      { calledAt: row.called_at, handedOverAt: row.handed_over_at, endedAt },
      text,
      message,
    );
    if (ended) {
      if (pending) await enqueuePending(scope, pending, text);
      this.outcomes.ended(scope, {
        runId: run.runId,
        projectId: run.projectId,
        appName: run.appName,
        path: run.path,
        method: run.method,
        mode: "wait",
        caller: run.caller,
        requestId: run.requestId,
        status: error.status,
        ending: "interrupted",
        failure: { by: "gateway", code: error.code },
        times: {
          acceptedAt: run.acceptedAt,
          calledAt: row.called_at,
          answeredAt: null,
          firstByteAt: null,
          handedOverAt: row.handed_over_at ?? null,
          endedAt,
        },
        bytesIn: run.bytesIn ?? 0,
        bytesOut: 0,
        webhook: pending !== null,
      });
      log("error", "waited run interrupted", { run_id: run.runId, project_id: run.projectId, phase: row.phase });
    }
    this.#sql.exec("DELETE FROM kept_run");
  }
}

/** A stored pending delivery (its secret sealed; the clear one never stored). */
function pendingOf(text: string): PendingDelivery {
  const stored = JSON.parse(text) as Omit<PendingDelivery, "createdAt" | "secret"> & { createdAt: string };
  return { ...stored, secret: undefined, createdAt: new Date(stored.createdAt) };
}

/**
 * The Durable Object class of the keepers, built from the Worker's `deps` and the root's outcome port
 * (src/index.ts). RPC: `run(appRequest, kept)`, `callerLeft()`.
 */
export function runKeeperClass(deps: Deps, outcomes: KeeperOutcomes) {
  return class RunKeeper extends DurableObject<Env> {
    readonly keeper: Keeper;

    constructor(state: DurableObjectState, env: Env) {
      super(state, env);
      this.keeper = new Keeper(state, env, deps, outcomes);
    }

    run(appRequest: Request, kept: KeptRun): Promise<KeeperAnswer> {
      return this.keeper.run(appRequest, kept);
    }

    callerLeft(): void {
      this.keeper.callerLeft();
    }

    override async alarm(): Promise<void> {
      await this.keeper.alarm();
    }
  };
}

export type RunKeeperClass = ReturnType<typeof runKeeperClass>;
export type RunKeeper = InstanceType<RunKeeperClass>;
