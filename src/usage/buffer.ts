import { log } from "../platform/log";
import { retry } from "../platform/retry";
import type { Scope } from "../platform/scope";
import type { RunRecord, RunStartRecord } from "./run-record";
import { ledgerOf } from "./ledger-client";
import { messagesOf } from "./message";
import type { RunRefusal } from "../runs/outcome";
import { hourOf, reasonOf, type RefusalCount } from "./refusals";

/**
 * The isolate's buffer of run records and run starts: a record costs the run one push; they leave in
 * batches (`flush`) in a run's `waitUntil`. Why, and what it costs: docs/usage.md#where-records-are-kept-and-why.
 * Relies on `waitUntil` being honoured for 30 s after a hang-up: records wait at most `USAGE_FLUSH_MS`
 * under one, and are lost only if the isolate dies abruptly meanwhile (logged; docs/usage.md, "Loss window").
 */

/** A batch this large leaves at once, in the `waitUntil` of the run that filled it. */
export const BATCH_MAX = 200;
/** Held records beyond this are dropped (and logged): the ledger is unreachable and memory is the isolate's. */
const HELD_MAX = 10_000;
/** Refusal counts held (one per project, hour and reason): past this many, further kinds wait for the next flush. */
const COUNTS_MAX = 10_000;

let held: RunRecord[] = [];
/** Starts held, by run id: a record that comes while its start is still here takes it out. */
let starting = new Map<string, RunStartRecord>();
/** Refusals held, one count per project, hour and reason: a flood of 429s is one entry, whatever its rate. */
let refused = new Map<string, RefusalCount>();
/** The pending flush timer: the invocation whose `waitUntil` holds it, and how to end its wait early. */
let timer: { ctx: Scope["ctx"]; wake: () => void } | null = null;

export function holdRecord(scope: Scope, record: RunRecord): void {
  // The benchmark's "recording off" (the same build, the seam does nothing).
  if (!scope.config.usage.recording) return;
  if (held.length >= HELD_MAX) {
    log("error", "usage record dropped: buffer full", { run_id: record.run_id, project_id: record.project_id });
    return;
  }
  starting.delete(record.run_id);
  held.push(record);
  leaveSoon(scope, held.length + starting.size >= BATCH_MAX);
}

/** A run was admitted: it is under way until its record comes (src/usage/ledger.ts `underWay`). */
export function holdStart(scope: Scope, start: RunStartRecord): void {
  if (!scope.config.usage.recording) return;
  if (held.length + starting.size >= HELD_MAX) {
    log("error", "usage start dropped: buffer full", { run_id: start.run_id, project_id: start.project_id });
    return;
  }
  starting.set(start.run_id, start);
  leaveSoon(scope, held.length + starting.size >= BATCH_MAX);
}

/** Adds a refusal to its project's count for its hour and reason; the count leaves with the next batch. */
export function holdRefusal(scope: Scope, refusal: RunRefusal): void {
  if (!scope.config.usage.recording) return;
  const hour = hourOf(refusal.at);
  const reason = reasonOf(refusal.reason);
  const key = `${refusal.projectId} ${hour} ${reason}`;
  const count = refused.get(key);
  if (count) {
    count.count++;
    return;
  }
  if (refused.size >= COUNTS_MAX) {
    log("error", "usage refusal not counted: counts full", { project_id: refusal.projectId, reason });
    return;
  }
  refused.set(key, { project_id: refusal.projectId, hour, reason, count: 1 });
  leaveSoon(scope, false);
}

/** Sends what is held at once (a full batch, or no flush delay), or after the flush delay. */
function leaveSoon(scope: Scope, full: boolean): void {
  const { env } = scope;
  // How long a record may wait for others (`USAGE_FLUSH_MS`: tests and the benchmark set it).
  const delay = scope.config.usage.flushMs;
  if (full || delay === 0) {
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
  if (held.length === 0 && refused.size === 0 && starting.size === 0) return;
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
  if (held.length === 0 && refused.size === 0 && starting.size === 0) return;
  const batch = held;
  const counts = [...refused.values()];
  const started = [...starting.values()];
  held = [];
  refused = new Map();
  starting = new Map();
  const byProject = new Map<string, { records: RunRecord[]; refusals: RefusalCount[]; starts: RunStartRecord[] }>();
  const of = (project: string) => {
    let entry = byProject.get(project);
    if (!entry) byProject.set(project, (entry = { records: [], refusals: [], starts: [] }));
    return entry;
  };
  for (const record of batch) of(record.project_id).records.push(record);
  for (const count of counts) of(count.project_id).refusals.push(count);
  for (const start of started) of(start.project_id).starts.push(start);
  if (byProject.size > 1 && (await toQueue(env, batch, counts, started))) return;
  for (const [project, { records, refusals, starts }] of byProject) {
    if (!(await twice(() => ledgerOf(env, project).add(records, refusals, starts)))) {
      log("error", "usage records lost: the ledger refused them twice", {
        project_id: project,
        records: records.length,
        refusals: refusals.length,
        starts: starts.length,
      });
    }
  }
}

/** Whether `send` succeeded within two tries, one after the other (a flush holds one connection of six). */
const twice = (send: () => Promise<unknown>): Promise<boolean> =>
  retry(send, { tries: 2 }).then(
    () => true,
    () => false,
  );

async function toQueue(
  env: Env,
  batch: RunRecord[],
  refusals: RefusalCount[],
  starts: RunStartRecord[],
): Promise<boolean> {
  for (const message of messagesOf(batch, refusals, starts)) {
    if (!(await twice(() => env.USAGE_QUEUE.send(message, { contentType: "json" })))) return false;
  }
  return true;
}
