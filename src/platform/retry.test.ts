import { describe, expect, it } from "vitest";
import { retry } from "./retry";

/** A `sleep` that only notes the pauses asked of it: the test's clock, moved by nobody. */
function notedSleep() {
  const pauses: number[] = [];
  return { pauses, sleep: async (ms: number) => void pauses.push(ms) };
}

describe("retry", () => {
  it("answers the first success, trying no more", async () => {
    const { pauses, sleep } = notedSleep();
    const tries: number[] = [];
    const value = await retry(
      async (attempt) => {
        tries.push(attempt);
        if (attempt < 2) throw new Error(`try ${attempt}`);
        return "done";
      },
      { tries: 5, sleep, pauseMs: (attempt) => 100 * attempt },
    );
    expect(value).toBe("done");
    expect(tries).toEqual([1, 2]);
    expect(pauses).toEqual([100]);
  });

  it("tries `tries` times, pausing on the given sleep between them, and rethrows the last error", async () => {
    const { pauses, sleep } = notedSleep();
    const tries: number[] = [];
    const failing = retry(
      async (attempt): Promise<never> => {
        tries.push(attempt);
        throw new Error(`try ${attempt}`);
      },
      { tries: 3, sleep, pauseMs: (attempt) => 50 * 2 ** attempt },
    );
    await expect(failing).rejects.toThrow("try 3");
    expect(tries).toEqual([1, 2, 3]);
    // A pause between two tries, none after the last.
    expect(pauses).toEqual([100, 200]);
  });

  it("without a pause, tries again at once", async () => {
    let calls = 0;
    await expect(
      retry(
        async () => {
          calls++;
          throw new Error("down");
        },
        { tries: 2 },
      ),
    ).rejects.toThrow("down");
    expect(calls).toBe(2);
  });
});
