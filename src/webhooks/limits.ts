/**
 * What one consumer invocation may hold at once. Cloudflare Workers allow 6 simultaneous open
 * outbound connections per invocation (more wait inside the runtime, where an attempt's timeout
 * would already be running) and 128 MB per isolate; these two semaphores keep the consumer within
 * both by construction, whatever the batch holds. docs/webhooks.md has the arithmetic.
 */

/** Deliveries in progress at once per invocation: each holds one connection at a time, so ≤ 6 connections. */
export const DELIVERY_LANES = 6;
/**
 * Body bytes held at once per invocation. A delivery holds its body once (signing reuses the buffer)
 * and the runtime may hold a second and third copy while sending and hashing: worst case 3 × this
 * = 72 MiB of bodies, beside the isolate's own few MB, under the 128 MB limit. Two deliveries of the
 * largest body (a 10 MiB answer in its envelope) fit at once.
 */
export const BODY_BUDGET_BYTES = 24 * 1024 * 1024;

/**
 * Subrequests one delivery may make at worst (fetch, D1, R2 all count; Workers Free allows 50 per
 * invocation): 3 POSTs, 1 R2 read, 3 claims and the read after a refused one, 3 outcome writes tried
 * twice each. `max_batch_size` in wrangler.toml × this stays ≤ 50 (a test checks).
 */
export const SUBREQUESTS_PER_DELIVERY = 3 + 1 + 3 + 1 + 3 * 2;

/** A counting semaphore whose waiters are served first come, first served; it remembers its high-water mark. */
export class Semaphore {
  #free: number;
  readonly #capacity: number;
  readonly #waiting: { amount: number; wake: () => void }[] = [];
  #highWater = 0;

  constructor(capacity: number) {
    this.#capacity = capacity;
    this.#free = capacity;
  }

  /** Takes `amount` (capped at the capacity, so one oversized holder still runs alone) and returns its release. */
  async acquire(amount = 1): Promise<() => void> {
    const take = Math.min(Math.max(amount, 0), this.#capacity);
    if (this.#waiting.length > 0 || this.#free < take) {
      await new Promise<void>((wake) => this.#waiting.push({ amount: take, wake }));
    } else {
      this.#free -= take;
    }
    this.#highWater = Math.max(this.#highWater, this.#capacity - this.#free);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#free += take;
      this.#serve();
    };
  }

  #serve() {
    // In order: a large waiter is not starved by smaller ones behind it.
    while (this.#waiting.length > 0 && this.#free >= this.#waiting[0]!.amount) {
      const next = this.#waiting.shift()!;
      this.#free -= next.amount;
      next.wake();
    }
  }

  get highWater(): number {
    return this.#highWater;
  }
}
