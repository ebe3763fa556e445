import type { Database } from "../../db/client";
import { StatementGroup } from "../../db/statement-group";
import type { Deps } from "../../platform/deps";
import type { Config } from "../../platform/env";
import type { Scope } from "../../platform/scope";
import { Semaphore } from "../../platform/semaphore";
import { BODY_BUDGET_BYTES } from "../lane-capacity";
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
  db: Database;
  /** Body bytes held at once (lane-capacity.ts). */
  budget: Semaphore;
  /** The claims and outcomes of this invocation's deliveries, written together (see `StatementGroup`). */
  writes: StatementGroup;
}

export const newDeliveryContext = (
  scope: Scope,
  parts: Partial<Pick<DeliveryContext, "budget" | "writes">> = {},
): DeliveryContext => ({
  env: scope.env,
  config: scope.config,
  deps: scope.deps,
  db: scope.db,
  budget: parts.budget ?? new Semaphore(BODY_BUDGET_BYTES),
  writes: parts.writes ?? new StatementGroup(scope.db, WRITE_WINDOW_MS),
});

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
