/**
 * A counting semaphore whose waiters are served first come, first served; it remembers its high-water
 * mark. It belongs to one invocation (a lane's alarm, a test): a waiter is woken by a release in the
 * same invocation, never by another's.
 */
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
