import type { Client } from "./helpers";

/** One thing a server-sent event stream said: an event (its id and data) or a comment line. */
export type StreamItem = { id: string | null; data: string } | { comment: string };

/**
 * A reader of a `text/event-stream` body that hands its items one at a time, as they arrive
 * (the WHATWG rules we use: fields `id` and `data`, `:` comments, a blank line ends an event).
 */
export function eventReader(response: Response) {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let ended = false;
  const queued: StreamItem[] = [];
  const parse = (block: string) => {
    const data: string[] = [];
    let id: string | null = null;
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) queued.push({ comment: line.slice(1).trim() });
      else if (line.startsWith("data: ")) data.push(line.slice(6));
      else if (line.startsWith("id: ")) id = line.slice(4);
    }
    if (data.length) queued.push({ id, data: data.join("\n") });
  };
  return {
    /** The next item, or `null` once the stream has ended. */
    async next(): Promise<StreamItem | null> {
      while (queued.length === 0 && !ended) {
        const { done, value } = await reader.read();
        if (done) {
          ended = true;
          break;
        }
        buffer += value;
        let at: number;
        while ((at = buffer.indexOf("\n\n")) !== -1) {
          parse(buffer.slice(0, at));
          buffer = buffer.slice(at + 2);
        }
      }
      return queued.shift() ?? null;
    },
    /** The next event (comments skipped), parsed. */
    async event(): Promise<{ id: string | null; run: Record<string, unknown> } | null> {
      for (;;) {
        const item = await this.next();
        if (item === null) return null;
        if ("data" in item) return { id: item.id, run: JSON.parse(item.data) as Record<string, unknown> };
      }
    },
    cancel: () => reader.cancel(),
  };
}

/** `GET` of a status URL as an event stream, with `Last-Event-ID` when given. */
export const follow = (api: Client, statusUrl: string, token: string, lastEventId?: string) =>
  api.call(new URL(statusUrl).pathname, {
    token,
    headers: { Accept: "text/event-stream", ...(lastEventId === undefined ? {} : { "Last-Event-ID": lastEventId }) },
  });

/**
 * A `sleep` for `Deps` that waits until the test says: the stream's 15 s keep-alives come when a test
 * calls `pass()`, never by the wall clock.
 */
export function heldSleeps() {
  const waiting: (() => void)[] = [];
  let waiters: (() => void)[] = [];
  return {
    sleep: (_ms: number) =>
      new Promise<void>((resolve) => {
        waiting.push(resolve);
        for (const w of waiters) w();
        waiters = [];
      }),
    /** Ends the oldest sleep that is waiting (one keep-alive interval passes). */
    pass() {
      const next = waiting.shift();
      if (!next) throw new Error("nothing is sleeping");
      next();
    },
    /** Resolves once at least `n` sleeps are waiting. */
    async waiting(n = 1) {
      while (waiting.length < n) await new Promise<void>((resolve) => waiters.push(resolve));
    },
  };
}
