import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import type { RunRecord } from "./run-record";
import { ledgerOf } from "./ledger-client";

/**
 * The isolate's buffer of run records. A record costs the run one push into an array; the records
 * leave in batches, one Durable Object call per project per batch (`UsageLedger.add`), in the
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
let timerSet = false;

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
  if (timerSet) return;
  timerSet = true;
  scope.ctx.waitUntil(
    new Promise<void>((resolve) => setTimeout(resolve, delay)).then(() => {
      timerSet = false;
      return flush(env);
    }),
  );
}

/**
 * Sends what is held, one ledger call per project, one after another: each call is a subrequest, and
 * a flush never holds more than one connection of the invocation's six.  A batch the ledger refuses is
 * tried once more (the ledger ignores a record it already has, so a retry never counts a run twice).
 */
export async function flush(env: Env): Promise<void> {
  if (held.length === 0) return;
  const batch = held;
  held = [];
  const byProject = new Map<string, RunRecord[]>();
  for (const record of batch) {
    const list = byProject.get(record.project_id);
    if (list) list.push(record);
    else byProject.set(record.project_id, [record]);
  }
  for (const [projectId, records] of byProject) {
    for (let tries = 1; tries <= 2; tries++) {
      try {
        await ledgerOf(env, projectId).add(records);
        break;
      } catch (error) {
        if (tries === 2) log("error", "usage records lost: the ledger refused them twice", { project_id: projectId, records: records.length, error });
      }
    }
  }
}
