/**
 * Tries `work` up to `tries` times, one after another, and answers its first success; after the last
 * failure, rethrows its error. Between two tries it waits `pauseMs(try)` on `sleep` (the invocation's
 * `deps.sleep`, which tests move by hand), or not at all without them. Every retry loop of the service
 * is this one: what differs between them is said in their arguments.
 */
export async function retry<T>(
  work: (attempt: number) => Promise<T>,
  options: { tries: number; sleep?: (ms: number) => Promise<void>; pauseMs?: (attempt: number) => number },
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work(attempt);
    } catch (error) {
      if (attempt >= options.tries) throw error;
      if (options.sleep && options.pauseMs) await options.sleep(options.pauseMs(attempt));
    }
  }
}
