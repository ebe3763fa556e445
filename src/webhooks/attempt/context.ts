import type { Database } from "../../db/client";
import { StatementGroup } from "../../db/statement-group";
import type { Deps } from "../../platform/deps";
import type { Config } from "../../platform/env";
import type { Scope } from "../../platform/scope";
import { Semaphore } from "../../platform/semaphore";
import { BODY_BUDGET_BYTES } from "../lane-capacity";
import { deliveryLogDb, deliveryLogName, openInD1 } from "../log";
import type { DeliveryMessage } from "../message";

/**
 * How long a write (an attempt's outcome, or the claim of a next attempt) waits for a neighbour whose
 * request is still in flight, to go to D1 in the same round trip. Short against the pause between
 * attempts and the 1 s left of the 5 s gap, long against a loopback or same-region answer.
 */
const WRITE_WINDOW_MS = 25;

/** What the deliveries of one lane invocation (an alarm, or a test) share. */
export interface DeliveryContext {
  env: Env;
  config: Config;
  deps: Deps;
  /** D1: the control plane (receivers' settings and state). */
  db: Database;
  /** Body bytes held at once (lane-capacity.ts). */
  budget: Semaphore;
  /** The claims and outcomes of this invocation's deliveries in D1, written together (see `StatementGroup`). */
  writes: StatementGroup;
  /**
   * The log that records `message`'s delivery and the group its claims and outcomes are written in: D1
   * and `writes`, or its project's log (`DELIVERY_LOG_STORE=objects`) and a group of that log's own.
   */
  log(message: Pick<DeliveryMessage, "projectId" | "id">): { db: Database; writes: StatementGroup };
  /**
   * Settles where `message`'s delivery is recorded before its first write (`log` answers by it from then
   * on): its log, or D1 for a delivery D1 recorded before the logs and holds open (`openInD1`).
   */
  findLog(message: Pick<DeliveryMessage, "projectId" | "id">): Promise<void>;
  /** Every group this invocation wrote through, for its figures. */
  groups(): StatementGroup[];
}

export function newDeliveryContext(
  scope: Scope,
  parts: Partial<Pick<DeliveryContext, "budget" | "writes">> = {},
): DeliveryContext {
  const writes = parts.writes ?? new StatementGroup(scope.db, WRITE_WINDOW_MS);
  const d1 = { db: scope.db, writes };
  // A lane's deliveries span its project's shards: one group per log (at most 8), made when first written.
  const logs = new Map<string, { db: Database; writes: StatementGroup }>();
  // Deliveries of this invocation that D1 recorded before the logs and holds open.
  const inD1 = new Set<string>();
  return {
    env: scope.env,
    config: scope.config,
    deps: scope.deps,
    db: scope.db,
    budget: parts.budget ?? new Semaphore(BODY_BUDGET_BYTES),
    writes,
    log: (message) => {
      if (scope.config.deliveryLogStore !== "objects" || inD1.has(message.id)) return d1;
      const name = deliveryLogName(message.projectId, message.id);
      let log = logs.get(name);
      if (!log) {
        const db = deliveryLogDb(scope.env, name);
        logs.set(name, (log = { db, writes: new StatementGroup(db, WRITE_WINDOW_MS) }));
      }
      return log;
    },
    findLog: async (message) => {
      if (await openInD1(scope, message.id)) inD1.add(message.id);
    },
    groups: () => [writes, ...[...logs.values()].map((l) => l.writes)],
  };
}

/** Room kept before a body for `id.timestamp.`, so the signed content is laid out without copying the body. */
export const PREFIX_ROOM = 96;

/** A body held once, with room before it for the signed prefix. */
export class HeldBody {
  constructor(
    private readonly buffer: Uint8Array,
    readonly size: number,
  ) {}

  get bytes(): Uint8Array {
    return this.buffer.subarray(PREFIX_ROOM, PREFIX_ROOM + this.size);
  }

  /** `prefix` + body as one view: the prefix is written into the room before the body. */
  signed(prefix: Uint8Array): Uint8Array | undefined {
    if (prefix.byteLength > PREFIX_ROOM) return undefined;
    const start = PREFIX_ROOM - prefix.byteLength;
    this.buffer.set(prefix, start);
    return this.buffer.subarray(start, PREFIX_ROOM + this.size);
  }
}

/**
 * A delivery in its lane, from its first attempt to its last: the message and what its attempts
 * reuse, its body read once (under the budget) and its secret opened once.
 */
export class DeliveryInProgress {
  body: HeldBody | undefined;
  /** `null`: unsigned. `undefined`: not opened yet. */
  secret: string | null | undefined;
  #release: (() => void) | undefined;

  constructor(readonly message: DeliveryMessage) {
    this.secret = message.secret ? undefined : null;
  }

  /** Takes the body's share of the budget, once; `release` gives it back. */
  async reserve(budget: Semaphore): Promise<void> {
    this.#release ??= await budget.acquire(PREFIX_ROOM + this.message.bodyBytes);
  }

  release(): void {
    this.#release?.();
  }
}
