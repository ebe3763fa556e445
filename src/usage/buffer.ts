import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import type { RunRecord } from "./run-record";
import { ledgerOf } from "./ledger-client";
import { messagesOf } from "./message";

/**
 * The isolate's buffer of run records. A record costs the run one push into an array; the records
 * leave in batches (one ledger call, or one queue send for several projects: `flush`), in the
 * `waitUntil` of the run that filled the batch or of the run that started the flush timer. One call per
 * run would cost about 0.25 ms of CPU (a Durable Object RPC, measured in the benchmark); a batch of n
 * divides that by n.
 *
 * Loss window: records wait at most `USAGE_FLUSH_MS` (1 s by default) in memory, always under a
 * pending `waitUntil`, which the platform honours for 30 s even after the caller hangs up. They are lost
 * only if the isolate dies abruptly within that window (a crash, an exceeded memory limit), or if the
 * ledger refuses a batch twice; both are logged, never seen by a caller.
 */

/** A batch this large leaves at once, in the `waitUntil` of the run that filled it. */
export const BATCH_MAX = 200;
/** Held records beyond this are dropped (and logged): the ledger is unreachable and memory is the isolate's. */
const HELD_MAX = 10_000;
const FLUSH_MS_DEFAULT = 1_000;

let held: RunRecord[] = [];
/** The pending flush timer: the invocation whose `waitUntil` holds it, and how to end its wait early. */
let timer: { ctx: Scope["ctx"]; wake: () => void } | null = null;

/** How long a record may wait for others: `USAGE_FLUSH_MS` (tests and the benchmark's off switch set it). */
function flushDelay(env: Env): number {
  const value = Number(env.USAGE_FLUSH_MS ?? FLUSH_MS_DEFAULT);
  return Number.isFinite(value) && value >= 0 ? value : FLUSH_MS_DEFAULT;
}

export function holdRecord(scope: Scope, record: RunRecord): void {
  const { env } = scope;
  // The benchmark's "recording off" (the same build, the seam does nothing).
  if (env.USAGE_RECORDING === "off") return;
  if (held.length >= HELD_MAX) {
    log("error", "usage record dropped: buffer full", { run_id: record.run_id, project_id: record.project_id });
    return;
  }
  held.push(record);
  const delay = flushDelay(env);
  if (held.length >= BATCH_MAX || delay === 0) {
    scope.ctx.waitUntil(flush(env));
    return;
  }
  if (timer !== null) return;
  const { ctx } = scope;
  scope.ctx.waitUntil(
    new Promise<void>((resolve) => {
      const handle = setTimeout(resolve, delay);
      timer = {
        ctx,
        wake: () => {
          clearTimeout(handle);
          resolve();
        },
      };
    }).then(() => {
      timer = null;
      return flush(env);
    }),
  );
}

/**
 * Sends what is held now, at the end of an invocation that no caller waits on (a queue batch, a cron).
 * The flush timer is for requests, where waiting for neighbours is free; a queue consumer's invocation
 * would be held by it (a consumer at concurrency 1 takes its next batch only when the invocation and
 * its `waitUntil` are over: the local broker showed async runs draining at one a second). A timer held
 * by this invocation is ended early; one held by another invocation is left to it (a promise is
 * resolved only from the context that made it).
 */
export function sendHeldNow(env: Env, ctx: Scope["ctx"]): void {
  if (held.length === 0) return;
  if (timer?.ctx === ctx) timer.wake();
  else ctx.waitUntil(flush(env));
}

/**
 * Sends what is held. A batch of one project (the busy case) goes to its ledger in one call; a batch
 * of several goes to the `usage-records` queue in one send (one subrequest whatever the projects; its
 * consumer calls each ledger), so an isolate serving many quiet projects does not pay a ledger call per
 * project per flush. Each call is tried twice, one after another (a flush holds one connection of six);
 * a queue that refuses falls back to the ledgers themselves. The ledger ignores a record it already
 * holds, so a retry never counts a run twice.
 */
export async function flush(env: Env): Promise<void> {
  if (held.length === 0) return;
  const batch = held;
  held = [];
  const projectId = batch[0]!.project_id;
  if (batch.some((r) => r.project_id !== projectId) && (await toQueue(env, batch))) return;
  const byProject = new Map<string, RunRecord[]>();
  for (const record of batch) {
    const list = byProject.get(record.project_id);
    if (list) list.push(record);
    else byProject.set(record.project_id, [record]);
  }
  for (const [project, records] of byProject) {
    if (!(await twice(() => ledgerOf(env, project).add(records)))) {
      log("error", "usage records lost: the ledger refused them twice", {
        project_id: project,
        records: records.length,
      });
    }
  }
}

async function twice(send: () => Promise<unknown>): Promise<boolean> {
  for (let tries = 1; tries <= 2; tries++) {
    try {
      await send();
      return true;
    } catch {
      // tried again once, then the caller decides
    }
  }
  return false;
}

async function toQueue(env: Env, batch: RunRecord[]): Promise<boolean> {
  for (const message of messagesOf(batch)) {
    if (!(await twice(() => env.USAGE_QUEUE.send(message, { contentType: "json" })))) return false;
  }
  return true;
}
