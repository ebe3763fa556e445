import { SSEStreamingApi } from "hono/streaming";
import type { AsyncRunStatus } from "../../db/schema";
import { ApiError, invalidField } from "../../platform/errors";
import { log } from "../../platform/log";
import type { Scope } from "../../platform/scope";
import {
  FOLLOWERS_PER_RUN_MAX,
  countStream,
  joinFollowers,
  readWord,
  STREAMS_PER_PROJECT_MAX,
  type Word,
} from "./followers";
import { resourceText, runJson } from "./resource";
import type { RunState } from "./store";
import { runRowsOf } from "./rows";

/**
 * A run's status as a stream (`Accept: text/event-stream` on its status URL): the run resource as an
 * event each time its state changes, a comment every 15 s, closed after the end; `Last-Event-ID`
 * resumes. It holds two WebSockets (its run's hub, its project's count) of an invocation's six
 * connections. How a change reaches it and the limits it stays within:
 * docs/runs.md#how-a-stream-is-told-and-the-limits-it-stays-within.
 */

/** A comment this often keeps proxies and clients from closing an idle stream (fal's 15 s). */
export const KEEP_ALIVE_MS = 15_000;
/** Every this many keep-alives the stream reads the run again, whether or not it was told of a change. */
export const RECHECK_EVERY = 4;
/** D1 queries the loop makes in one invocation before it closes and lets the client resume: D1 allows 50 per invocation on Workers Free. */
export const QUERIES_MAX = 40;
/** Times a stream joins its hub again after losing it (an evicted or restarted hub) before it closes instead. */
export const REJOINS_MAX = 3;
/** What an EventSource waits before it reconnects after the stream closed before the run's end. */
export const RECONNECT_MS = 1_000;
/** A stream refused for the streams already open: when to try again (a stream's place frees as a run ends or a client leaves). */
export const FULL_RETRY_AFTER_S = 15;

/** Each state's place in a run's life: the id of its event. */
const PLACE: Record<AsyncRunStatus, number> = { queued: 1, running: 2, succeeded: 3, failed: 3, cancelled: 3 };
const FINAL_PLACE = 3;
const isFinal = (status: AsyncRunStatus) => PLACE[status] === FINAL_PLACE;

/** `Last-Event-ID` as a place in the run's life (`null` without it); anything but one of our ids is a 400. */
export function lastPlaceOf(request: Request): number | null {
  const value = request.headers.get("last-event-id");
  if (value === null || value === "") return null;
  if (!/^[1-3]$/.test(value))
    throw invalidField("header", "Last-Event-ID", "must be the id of an event of this run's stream: 1, 2 or 3");
  return Number(value);
}

const HEADERS = { "Content-Type": "text/event-stream", "Cache-Control": "no-store" };

/** Resolves the waiter when something happened: a word from the hub, the hub gone, the client gone. */
class Wakeup {
  #pending = false;
  #resolve: (() => void) | undefined;
  ring = () => {
    this.#pending = true;
    this.#resolve?.();
  };
  next(): Promise<"word"> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve("word");
    }
    return new Promise((resolve) => {
      this.#resolve = () => {
        this.#pending = false;
        this.#resolve = undefined;
        resolve("word");
      };
    });
  }
}

/**
 * The run resource at `run`'s state: an ended run's with its result, read now (the one read of it a
 * stream makes); a queued or running run has none.
 */
async function resourceAt(scope: Scope, run: RunState): Promise<string> {
  if (!isFinal(run.status)) return runJson(run, null);
  const stored = (await runRowsOf(scope, run.projectId, run.id).storedResult(run.id)) ?? {
    result: null,
    resultInR2: false,
  };
  return resourceText(scope.env, { ...run, ...stored });
}

/**
 * The event stream of `run` (its state, already read and authorized by the caller), from `Last-Event-ID` on.
 */
export async function followRun(scope: Scope, request: Request, run: RunState): Promise<Response> {
  let sent = lastPlaceOf(request) ?? 0;
  const headers = { ...HEADERS, "X-Run-Id": run.id };
  if (isFinal(run.status)) {
    // Ended: its last event (unless the client has it), and no stream to keep open.
    if (sent >= FINAL_PLACE) return new Response(null, { status: 204, headers: { "X-Run-Id": run.id } });
    const sse = eventStream();
    const text = await resourceAt(scope, run);
    void sse.writeSSE({ id: String(FINAL_PLACE), data: text }).finally(() => sse.close());
    return new Response(sse.responseReadable, { status: 200, headers });
  }

  const rows = runRowsOf(scope, run.projectId, run.id);
  // Joined to the run's hub, then counted among the project's streams: each refuses past its bound.
  let hub = await join(scope.env, run.id);
  let counted: WebSocket | undefined;
  let now: RunState | undefined;
  try {
    counted = await countInProject(scope.env, run.projectId);
    // Joined first, then marked: a change after this write is told to the hub, and one before it is read here.
    now = await rows.follow(run.id);
  } catch (error) {
    closeAll(hub, counted);
    throw error;
  }
  const sse = eventStream();
  const wakeup = new Wakeup();
  let hubLost = false;
  let countLost = false;
  let clientGone = false;
  const words: Word[] = [];
  const listen = (socket: WebSocket) => {
    socket.addEventListener("message", (event) => {
      words.push(readWord(typeof event.data === "string" ? event.data : ""));
      wakeup.ring();
    });
    const lost = () => {
      hubLost = true;
      wakeup.ring();
    };
    socket.addEventListener("close", lost);
    socket.addEventListener("error", lost);
  };
  listen(hub);
  const lostCount = () => {
    countLost = true;
    wakeup.ring();
  };
  counted.addEventListener("close", lostCount);
  counted.addEventListener("error", lostCount);
  sse.onAbort(() => {
    clientGone = true;
    wakeup.ring();
  });

  /** Sends the resource at `place` when it is a state after the last one sent; whether it is the end. */
  const sendAt = async (place: number, resource: () => Promise<string> | string): Promise<boolean> => {
    if (place > sent) {
      await sse.writeSSE({ id: String(place), data: await resource() });
      sent = place;
    }
    return place === FINAL_PLACE;
  };
  const send = (state: RunState) => sendAt(PLACE[state.status], () => resourceAt(scope, state));

  const loop = async () => {
    let queries = 0;
    let keepAlives = 0;
    let rejoins = 0;
    // A change between a lost hub's last word and the new hub's first was told to nobody: read once more.
    let rejoined = false;
    let tick = scope.deps.sleep(KEEP_ALIVE_MS).then(() => "tick" as const);
    if (!now || (await send(now))) return;
    for (;;) {
      const woke = await Promise.race([tick, wakeup.next()]);
      if (clientGone) return;
      // The project's count of streams restarted: this stream is no longer counted, so it ends; its client resumes.
      if (countLost) return resumeLater();
      let reread = hubLost || rejoined;
      rejoined = false;
      if (woke === "tick") {
        await sse.write(": keep-alive\n\n");
        tick = scope.deps.sleep(KEEP_ALIVE_MS).then(() => "tick" as const);
        if (++keepAlives % RECHECK_EVERY === 0) reread = true;
      }
      // A word that carries the run is sent as it is; one that does not is read from D1.
      for (const word of words.splice(0)) {
        const place = PLACE[word.status as AsyncRunStatus] as number | undefined;
        if (word.resource === null || place === undefined) reread = true;
        else if (await sendAt(place, () => word.resource!)) return;
      }
      if (!reread) continue;
      if (queries >= QUERIES_MAX) return resumeLater();
      queries++;
      const row = await rows.stateById(run.id);
      // Purged at the end of its retention while followed: nothing more will come.
      if (!row || (await send(row))) return;
      if (hubLost) {
        if (rejoins++ >= REJOINS_MAX) return resumeLater();
        hub = await join(scope.env, run.id);
        hubLost = false;
        listen(hub);
        rejoined = true;
        wakeup.ring();
      }
    }
  };
  /** Closes before the end; the client reconnects with `Last-Event-ID` and resumes in a new invocation. */
  const resumeLater = () => sse.write(`retry: ${RECONNECT_MS}\n\n`);

  void loop()
    .catch(async (error: unknown) => {
      // A read that failed (D1 or R2 unavailable): the client resumes where it was.
      log("warn", "run stream closed early", { run_id: run.id, error });
      await resumeLater();
    })
    .finally(async () => {
      closeAll(hub, counted);
      await sse.close();
    });
  return new Response(sse.responseReadable, { status: 200, headers });
}

/** Closes what the stream held (its count, its hub), each that is there and not closed already. */
function closeAll(...sockets: (WebSocket | undefined)[]): void {
  for (const socket of sockets) {
    try {
      socket?.close();
    } catch {
      // Closed by its object already.
    }
  }
}

/** Hono's writer of server-sent events over a stream of our own (no router context needed). */
function eventStream(): SSEStreamingApi {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  return new SSEStreamingApi(writable, readable);
}

/** Joins the run's followers: a 429 when the run has its most, a 503 to retry when its hub cannot be reached now. */
async function join(env: Env, runId: string): Promise<WebSocket> {
  const hub = await reach(() => joinFollowers(env, runId), { run_id: runId });
  if (hub) return hub;
  throw full(
    `This run already has ${FOLLOWERS_PER_RUN_MAX} status streams, the most one run may have. Read its state with GET (without Accept: text/event-stream), or retry after Retry-After.`,
    FOLLOWERS_PER_RUN_MAX,
  );
}

/** The stream counted among the project's open streams: a 429 when it has its most, a 503 to retry when its count cannot be reached now. */
async function countInProject(env: Env, projectId: string): Promise<WebSocket> {
  const counted = await reach(() => countStream(env, projectId), { project_id: projectId });
  if (counted) return counted;
  throw full(
    `This project already has ${STREAMS_PER_PROJECT_MAX} status streams open, the most one project may have. Read the run's state with GET (without Accept: text/event-stream), or retry after Retry-After.`,
    STREAMS_PER_PROJECT_MAX,
  );
}

const full = (detail: string, limit: number) =>
  new ApiError("rate_limited", detail, {
    headers: { "Retry-After": String(FULL_RETRY_AFTER_S) },
    extensions: { limit },
  });

/** `open()`, or a 503 to retry when the object it reaches cannot be reached now. */
async function reach<T>(open: () => Promise<T>, ids: Record<string, string>): Promise<T> {
  try {
    return await open();
  } catch (error) {
    log("warn", "run followers unreachable", { ...ids, error });
    throw new ApiError(
      "service_unavailable",
      "The run's status stream could not be opened this time; retry the request.",
      {
        headers: { "Retry-After": "1" },
      },
    );
  }
}
