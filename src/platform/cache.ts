/**
 * A small in-isolate cache with a time to live, for the hot path (tokens, apps, hostnames).
 * Each isolate has its own; an entry is at most `ttlMs` stale, which bounds how long a change
 * (a revoked token, a removed domain) takes to be seen everywhere. `delete` makes this isolate
 * see a change at once.
 */
export class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; expires: number }>();

  constructor(
    readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: string, now: number): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expires <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V, now: number): void {
    this.#entries.delete(key);
    if (this.#entries.size >= this.maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { value, expires: now + this.ttlMs });
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
  }
}
