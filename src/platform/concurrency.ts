/**
 * Runs `work` over `items`, at most `limit` at a time; one failure does not stop the others. Workers
 * allow 6 simultaneous open outbound connections per invocation: callers size `limit` against that.
 */
export async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<unknown>,
): Promise<PromiseSettledResult<unknown>[]> {
  const results: PromiseSettledResult<unknown>[] = [];
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!).then(
        (value) => ({ status: "fulfilled", value }) as const,
        (reason: unknown) => ({ status: "rejected", reason }) as const,
      );
    }
  });
  await Promise.all(lanes);
  return results;
}

/**
 * `work` over every one of `items`, at most `limit` at a time (`eachLimited`), and their answers in
 * `items`' order; when any failed, the first failure is thrown once all have ended: a caller that merges
 * the answers (a project's shards) never acts on part of them.
 */
export async function allLimited<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const settled = await eachLimited(items, limit, work);
  const failed = settled.find((result) => result.status === "rejected");
  if (failed) throw failed.reason;
  return settled.map((result) => (result as PromiseFulfilledResult<R>).value);
}
