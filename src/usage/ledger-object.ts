import { DurableObject } from "cloudflare:workers";
import type { RunRecord } from "./run-record";
import type { RefusalCount } from "./refusals";
import { usageConfigOf } from "../platform/env";
import { DAY_MS } from "../platform/time";
import { Ledger, type RecordQuery, SLICE_PAUSE_MS, type UsageFigures, type BucketQuery } from "./ledger";

/**
 * The Durable Object class of the ledgers (wrangler.toml `USAGE_LEDGER`), exported by the root
 * (src/index.ts). RPC: `add`, `record`, `list`, `usage`, `purge`. Its alarm purges the ledger once a
 * day, in slices: while a slice leaves more to do, the next alarm comes `SLICE_PAUSE_MS` later.
 */
export class UsageLedger extends DurableObject<Env> {
  readonly ledger: Ledger;

  constructor(state: DurableObjectState, env: Env) {
    super(state, env);
    // `USAGE_LEDGER_BYTES_MAX`, validated with every other setting (a malformed one fails the call loudly).
    this.ledger = new Ledger(state.storage, usageConfigOf(env).ledgerBytesMax);
  }

  async add(records: RunRecord[], refusals: RefusalCount[] = []): Promise<{ added: number }> {
    const result = this.ledger.add(records, refusals);
    await this.ledger.armPurge();
    return result;
  }

  record(runId: string, callers?: string[]) {
    return this.ledger.record(runId, callers);
  }

  list(q: RecordQuery) {
    return this.ledger.list(q);
  }

  usage(q: BucketQuery): UsageFigures {
    return this.ledger.usage(q);
  }

  counters() {
    return this.ledger.counters();
  }

  stats() {
    return this.ledger.stats();
  }

  purge(now: number) {
    return this.ledger.purge(now);
  }

  override async alarm(): Promise<void> {
    const { more } = this.ledger.purge(Date.now());
    if (more) await this.ctx.storage.setAlarm(Date.now() + SLICE_PAUSE_MS);
    // The next purge while anything is left; an idle, emptied ledger sleeps until its next run arms it.
    else if (!this.ledger.isEmpty()) await this.ctx.storage.setAlarm(Date.now() + DAY_MS);
  }
}
