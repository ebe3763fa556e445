import { DurableObject } from "cloudflare:workers";
import type { RunRecord, RunStartRecord } from "./run-record";
import type { RefusalCount } from "./refusals";
import { usageConfigOf } from "../platform/env";
import { RUNS_CHANGED } from "./ledger-client";
import { DAY_MS } from "../platform/time";
import {
  Ledger,
  type RecordQuery,
  SLICE_PAUSE_MS,
  type UsageFigures,
  type BucketQuery,
  type UnderWayQuery,
} from "./ledger";

/**
 * The Durable Object class of the ledgers (wrangler.toml `USAGE_LEDGER`), exported by the root
 * (src/index.ts). RPC: `add`, `record`, `list`, `underWay`, `usage`, `purge`. Its alarm purges the
 * ledger once a day, in slices: while a slice leaves more to do, the next alarm comes `SLICE_PAUSE_MS` later.
 *
 * Watchers: the project's live runs (src/usage/live.ts, the dashboard's Runs and run pages) hold a
 * WebSocket here (`fetch` with `Upgrade: websocket`), and hear `RUNS_CHANGED` after each batch that
 * started or ended a run. The sockets are the hibernation API's: a ledger is not held in memory (nor
 * billed) for them while nothing happens, and a batch with no watcher costs one empty list.
 */
export class UsageLedger extends DurableObject<Env> {
  readonly ledger: Ledger;

  constructor(state: DurableObjectState, env: Env) {
    super(state, env);
    // `USAGE_LEDGER_BYTES_MAX`, validated with every other setting (a malformed one fails the call loudly).
    this.ledger = new Ledger(state.storage, usageConfigOf(env).ledgerBytesMax);
  }

  async add(
    records: RunRecord[],
    refusals: RefusalCount[] = [],
    starts: RunStartRecord[] = [],
  ): Promise<{ added: number }> {
    const result = this.ledger.add(records, refusals, starts);
    if (records.length > 0 || starts.length > 0) this.#tellWatchers();
    await this.ledger.armPurge();
    return result;
  }

  /** A watcher joins: the Worker serving a project's live runs opens a WebSocket here. */
  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket")
      return new Response("A ledger's watchers join by WebSocket.", { status: 426 });
    const pair = new WebSocketPair();
    this.ctx.acceptWebSocket(pair[1]);
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  /** Watchers only listen. */
  override webSocketMessage(): void {}

  #tellWatchers(): void {
    for (const socket of this.ctx.getWebSockets()) {
      try {
        socket.send(RUNS_CHANGED);
      } catch {
        // A socket closing as it is told: its stream is gone, or reconnects and reads the ledger anyway.
      }
    }
  }

  underWay(q: UnderWayQuery) {
    return this.ledger.underWay(q);
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

  runsIn(from: number, to: number, app_name?: string) {
    return this.ledger.runsIn(from, to, app_name);
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
