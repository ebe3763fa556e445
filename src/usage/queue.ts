import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import { ledgerOf } from "./ledger-client";
import { contentsOf } from "./message";
import type { RefusalCount } from "./refusals";
import type { RunRecord, RunStartRecord } from "./run-record";

/**
 * The `usage-records` consumer: each project's records of the batch go to its ledger in one call.
 * Subrequests: one per project, at most LEDGER_CALLS_MAX per invocation (Workers Paid allows 1,000);
 * messages past that budget go back to the queue for the next batch. A failed ledger call hands its
 * messages back too; the ledger ignores records it already holds, so a retry never counts a run twice.
 */
export const LEDGER_CALLS_MAX = 900;

export async function consumeUsageRecords(batch: MessageBatch<unknown>, scope: Scope): Promise<void> {
  const taken: { msg: Message<unknown>; records: RunRecord[]; refusals: RefusalCount[]; starts: RunStartRecord[] }[] =
    [];
  const projects = new Set<string>();
  for (const msg of batch.messages) {
    const contents = contentsOf(msg.body);
    if (contents === null) {
      log("error", "unreadable usage records message dropped", { message_id: msg.id });
      msg.ack();
      continue;
    }
    const { records, refusals, starts } = contents;
    const mine = new Set([...records, ...refusals, ...starts].map((r) => r.project_id));
    const added = [...mine].filter((p) => !projects.has(p)).length;
    if (projects.size + added > LEDGER_CALLS_MAX && taken.length > 0) {
      msg.retry();
      continue;
    }
    for (const p of mine) projects.add(p);
    taken.push({ msg, records, refusals, starts });
  }
  const byProject = new Map<
    string,
    { records: RunRecord[]; refusals: RefusalCount[]; starts: RunStartRecord[]; from: Set<Message<unknown>> }
  >();
  const of = (projectId: string, msg: Message<unknown>) => {
    let entry = byProject.get(projectId);
    if (!entry) byProject.set(projectId, (entry = { records: [], refusals: [], starts: [], from: new Set() }));
    entry.from.add(msg);
    return entry;
  };
  for (const { msg, records, refusals, starts } of taken) {
    for (const record of records) of(record.project_id, msg).records.push(record);
    for (const count of refusals) of(count.project_id, msg).refusals.push(count);
    for (const start of starts) of(start.project_id, msg).starts.push(start);
  }
  const failed = new Set<Message<unknown>>();
  for (const [projectId, { records, refusals, starts, from }] of byProject) {
    try {
      await ledgerOf(scope.env, projectId).add(records, refusals, starts);
    } catch (error) {
      log("error", "usage records not added; their messages go back to the queue", {
        project_id: projectId,
        records: records.length,
        error,
      });
      for (const msg of from) failed.add(msg);
    }
  }
  for (const { msg } of taken) {
    if (failed.has(msg)) msg.retry({ delaySeconds: 1 });
    else msg.ack();
  }
}
