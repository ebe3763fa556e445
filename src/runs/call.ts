import type { Deps } from "../platform/deps";
import { ApiError } from "../platform/errors";
import { isTimeout } from "../platform/http";
import type { CallLimits } from "./context";
import { type BodyLimit, bodyTooLarge, concat } from "./bodies";

/** What the gateway sends the app: built by the admit stage, the same for a synchronous run and the async consumer. */
export interface AppRequest {
  url: string;
  method: string;
  headers: Headers;
  body: BodyInit | null;
  runId: string;
  /** The caller's streamed body's limit: past it the call ends, and answers 413 rather than 502. */
  bodyLimit?: BodyLimit;
}

/** How an answer's body ended: read to its end, cancelled (the caller went), silent too long, or broken off. */
export type BodyEnd = "done" | "cancelled" | "idle" | "broken";

/**
 * What crossed of an app's passed-through body, counted as it was read: decoded bytes, when the first
 * came (`Date.now()`), and how the body ended. The run's outcome is made from it once `ended` resolves.
 */
export interface AnswerTally {
  bytes: number;
  firstByteAt: number | null;
  ended: Promise<BodyEnd>;
}

/** The app's answer: its status and headers, and its body read one of two ways. */
export interface AppCall {
  /** The app's own response; read its body through `stream()` or `text()`, never directly. */
  response: Response;
  /** `Date.now()` when the call was sent: a run's `run_time_ms` counts from here. */
  startedAt: number;
  /** `Date.now()` when the app's response headers came. */
  answeredAt: number;
  /**
   * The body, decoded, passed on chunk by chunk as it arrives, under the silence watch (`relay`), in the
   * runtime's own pipe (an `IdentityTransformStream`); `null` for none.
   */
  stream(): ReadableStream<Uint8Array> | null;
  /**
   * The body, decoded, lent chunk by chunk to `sink` as it arrives, under the silence watch (`relay`):
   * a chunk is valid until `sink`'s promise settles (copy what you keep). Resolves when the body ended
   * (at once for none); rejects with why it broke off, the app's call then ended.
   */
  relay(sink: ChunkSink): Promise<void>;
  /**
   * The body through the runtime's own pipe, for an answer of a declared length passed on as it is:
   * no JavaScript touches its chunks, and no silence timer watches it (`docs/run-proxy.md` says what
   * a stall then costs and what bounds it). `null` when the answer has no declared length. The
   * `tally` ends with the pipe, counting the declared length once it is whole (a small body's at once).
   */
  piped(): { body: ReadableStream<Uint8Array> | null; length: number | null } | null;
  /**
   * What `stream()`, `relay()` or `piped()` passed on, for the run's outcome: counted in the read the stream does
   * anyway, so it adds no step of its own; ends at once for a body-less answer.
   */
  tally: AnswerTally;
  /** The whole body as text when it is at most `max` decoded bytes; `null` when larger (the call is then ended). */
  text(max: number): Promise<string | null>;
}

export const runMeta = (runId: string) => ({ extensions: { run_id: runId }, headers: { "X-Run-Id": runId } });

/** The problem of a stream that stayed silent too long: its error, seen by whoever reads the body. */
export class StreamIdle extends ApiError {
  constructor(idleMs: number, runId: string) {
    super("gateway_timeout", `The app sent nothing for ${idleMs} ms in the middle of its answer.`, runMeta(runId));
  }
}

/** Largest read of the app's body at once: what arrived meanwhile comes in one chunk (see `relay`). */
const READ_BYTES = 256 * 1024;
/** The first read's size, and the size a read falls back to when what arrives is small. */
const FIRST_READ_BYTES = 16 * 1024;

/** A read that waited this long for the app found it slow: the buffer goes back to the first size. */
const SLOW_READ_MS = 50;

/**
 * The buffer of the read after one into `buffer` that brought `got` bytes after `waitedMs`: the same
 * buffer while the reads fit it, four times larger when one came back full (the app's chunks are
 * larger than the buffer), back to the first size when one came back under a quarter full after
 * waiting for the app (a trickle: a slow stream holds 16 KiB, not 256, while it waits). A new buffer
 * only when the size changes: a stream that keeps its pace reads into one buffer from start to end,
 * so it leaves no garbage behind. (A fast body's reads often come back part full, split where the
 * network split it: they do not shrink the buffer, only a wait does.)
 */
function nextBuffer(buffer: ArrayBuffer, got: number, waitedMs: number): ArrayBuffer {
  const size = buffer.byteLength;
  if (got === size && size < READ_BYTES) return new ArrayBuffer(Math.min(size * 4, READ_BYTES));
  if (got * 4 < size && size > FIRST_READ_BYTES && waitedMs >= SLOW_READ_MS) return new ArrayBuffer(FIRST_READ_BYTES);
  return buffer;
}

/** Where the relayed body goes: a chunk is lent until the promise settles (the next read reuses its buffer). */
export type ChunkSink = (chunk: Uint8Array) => void | Promise<void>;

/** The silence watch of one body: its limit, and what ending the app's call means. */
interface Watch {
  idleMs: number;
  runId: string;
  end: (reason: unknown) => void;
  /** Whether the run was ended from outside (the caller hung up): a broken read is then a cancel. */
  cancelled: () => boolean;
}

/**
 * The app's body relayed to `sink` as it arrives, under a watch that ends the call when the app stays
 * silent `idleMs`: silence counts only while a read waits for the app, never while `sink` waits for the
 * caller, and one timer per period ends the run between `idleMs` and 2 × `idleMs` after the app's last
 * byte. Two buffers take turns, so nothing is read ahead of a slow sink by more than one chunk and no
 * garbage is left per chunk; why, and what it costs: docs/runs.md#streaming-and-timeouts.
 *
 * Resolves when the body ended; rejects with `StreamIdle`, the read's error (the call broken or
 * ended), or what `sink` threw (the app's call is then ended at once, even while a read waits).
 */
async function relay(
  body: ReadableStream<Uint8Array>,
  watch: Watch,
  sink: ChunkSink,
  counting?: { count(bytes: number): void; settle(how: BodyEnd): void },
): Promise<void> {
  const reader = body.getReader({ mode: "byob" });
  let readingSince: number | null = null;
  let idle: StreamIdle | null = null;
  const look = () => {
    const waitedMs = readingSince === null ? 0 : Date.now() - readingSince;
    if (waitedMs < watch.idleMs) {
      timer = setTimeout(look, watch.idleMs - waitedMs);
      return;
    }
    idle = new StreamIdle(watch.idleMs, watch.runId);
    watch.end(idle);
    void reader.cancel(idle).catch(() => undefined);
  };
  let timer = setTimeout(look, watch.idleMs);
  let ending: BodyEnd = "broken";
  // What `sink` threw: the app's call is ended at once (a read waiting for the app then breaks off).
  let refused = null as { error: unknown } | null;
  /** `chunk` lent to `sink`; settles (never rejects) once `sink` is done with it, counted if taken. */
  const lend = (chunk: Uint8Array): Promise<void> =>
    Promise.resolve()
      .then(() => sink(chunk))
      .then(
        () => counting?.count(chunk.byteLength),
        (error: unknown) => {
          if (refused) return;
          refused = { error };
          watch.end(error);
          void reader.cancel(error).catch(() => undefined);
        },
      );
  // Two buffers: the next read fills one while the chunk in the other is lent to `sink`.
  let free = new ArrayBuffer(FIRST_READ_BYTES);
  let lent: { taken: Promise<void>; buffer: ArrayBuffer; bytes: number; waitedMs: number } | null = null;
  /** Waits for the lent chunk to be taken; its buffer, resized for the next read (`nextBuffer`), is free again. */
  const taken = async (): Promise<ArrayBuffer | null> => {
    if (lent === null) return null;
    const { buffer, bytes, waitedMs } = lent;
    await lent.taken;
    lent = null;
    if (refused) throw refused.error;
    return nextBuffer(buffer, bytes, waitedMs);
  };
  try {
    for (;;) {
      let read: ReadableStreamReadResult<Uint8Array>;
      const asked = Date.now();
      readingSince = asked;
      try {
        read = await reader.read(new Uint8Array(free));
      } catch (error) {
        await lent?.taken;
        if (refused) throw refused.error;
        ending = idle ? "idle" : watch.cancelled() ? "cancelled" : "broken";
        throw idle ?? error;
      } finally {
        readingSince = null;
      }
      if (read.done) break;
      const waitedMs = Date.now() - asked;
      const chunk = read.value;
      // The read transferred the buffer: its bytes now live behind `chunk.buffer`.
      const buffer = chunk.buffer as ArrayBuffer;
      if (chunk.byteLength === 0) {
        free = buffer;
        continue;
      }
      const next = await taken();
      lent = { taken: lend(chunk), buffer, bytes: chunk.byteLength, waitedMs };
      free = next ?? new ArrayBuffer(buffer.byteLength);
    }
    await taken();
    ending = "done";
  } catch (error) {
    if (refused) ending = "cancelled";
    throw error;
  } finally {
    clearTimeout(timer);
    counting?.settle(ending);
  }
}

/**
 * Calls the app (by hand rather than with `hono/proxy`: docs/runs.md#the-run-stage-by-stage says why).
 * `RUN_TIMEOUT_MS` bounds the wait for the response headers (504); after them, only silence longer than
 * `idleMs` ends the call. `cancel` ends it at once: the caller hung up (a run without a webhook), or its
 * grace after a hang-up is over (a run with one). Redirects are not followed: the caller's headers must
 * not travel to wherever the app points.
 *
 * Platform limits relied on: the call holds one of the invocation's 6 simultaneous outbound
 * connections for as long as the body flows (a webhook run opens its second, the queue send, only after
 * the answer ended); nothing of a passed-through body is held, so a stream of any length stays within
 * the isolate's 128 MB; Cloudflare cancels a request's work when its caller hangs up, and this ends the
 * app's call itself at that moment rather than leaving the connection to be torn down later.
 */
export async function callApp(
  deps: Deps,
  appRequest: AppRequest,
  limits: CallLimits,
  cancel?: AbortSignal,
): Promise<AppCall> {
  const meta = runMeta(appRequest.runId);
  const controller = new AbortController();
  const { signal } = controller;
  const end = (reason: unknown) => controller.abort(reason);
  // A timer of our own, cleared once the headers are in: `AbortSignal.timeout` would leave one pending
  // for the whole timeout after every run.
  const timer = setTimeout(
    () => end(new DOMException(`No answer within ${limits.headersMs} ms`, "TimeoutError")),
    limits.headersMs,
  );
  const onCancel = () => end(cancel?.reason ?? new DOMException("The run was ended", "AbortError"));
  if (cancel?.aborted) onCancel();
  else cancel?.addEventListener("abort", onCancel, { once: true });
  appRequest.bodyLimit?.onExceeded(() =>
    end(new DOMException("The request body passed the run's limit", "AbortError")),
  );
  const startedAt = Date.now();
  let response: Response;
  try {
    response = await deps.outbound.fetch(
      new Request(appRequest.url, {
        method: appRequest.method,
        headers: appRequest.headers,
        body: appRequest.body,
        signal,
        redirect: "manual",
      }),
    );
  } catch (error) {
    cancel?.removeEventListener("abort", onCancel);
    if (appRequest.bodyLimit?.exceeded())
      throw bodyTooLarge("The request body grew past it as it was sent; the app's call was ended.", meta);
    // The run's own reason to end the call (its deadline, `deadline.ts`) is the caller's problem as it is.
    if (signal.reason instanceof ApiError) throw signal.reason;
    if (isTimeout(error) || signal.aborted)
      throw new ApiError("gateway_timeout", `The app did not answer within ${limits.headersMs} ms.`, meta);
    throw new ApiError("bad_gateway", "The app could not be reached.", { ...meta, cause: error });
  } finally {
    clearTimeout(timer);
  }
  const answeredAt = Date.now();
  // The cancel listener stays while the body flows (a hang-up mid-stream ends the call too) and goes with it.
  const over = () => cancel?.removeEventListener("abort", onCancel);
  /** What a broken read of the body means for the caller. */
  const brokenOff = (error: unknown): ApiError => {
    if (signal.reason instanceof ApiError) return signal.reason;
    if (error instanceof ApiError) return error;
    if (signal.aborted || isTimeout(error))
      return new ApiError("gateway_timeout", "The app's answer was cut off by the run's time limits.", meta);
    return new ApiError("bad_gateway", "The app's answer broke off.", { ...meta, cause: error });
  };
  const raw = response;
  const empty = raw.body === null || NULL_BODY.has(raw.status);
  if (empty) {
    await raw.body?.cancel().catch(() => undefined);
    over();
  }
  let settle: (how: BodyEnd) => void = () => undefined;
  const length = raw.headers.get("content-length");
  const tally: AnswerTally = { bytes: 0, firstByteAt: null, ended: new Promise((resolve) => (settle = resolve)) };
  if (empty) settle("done");
  let callerGone = false;
  const watch: Watch = {
    idleMs: limits.idleMs,
    runId: appRequest.runId,
    end,
    cancelled: () => callerGone || cancel?.aborted === true,
  };
  const counting = {
    count(bytes: number) {
      tally.firstByteAt ??= Date.now();
      tally.bytes += bytes;
    },
    settle,
  };
  return {
    response: raw,
    startedAt,
    answeredAt,
    tally,
    stream() {
      if (empty) return null;
      const { readable, writable } = new IdentityTransformStream();
      const writer = writable.getWriter();
      // The caller went away (its side of the pipe was cancelled) while the app is silent: no write
      // would notice, so the call ends now rather than at the app's next chunk.
      writer.closed.catch(() => {
        callerGone = true;
        end(new DOMException("The caller went away", "AbortError"));
      });
      relay(raw.body!, watch, (chunk) => writer.write(chunk), counting)
        .then(
          () => writer.close(),
          (error: unknown) => writer.abort(error),
        )
        .catch(() => undefined)
        .finally(over);
      return readable;
    },
    relay(sink) {
      if (empty) return Promise.resolve();
      return relay(raw.body!, watch, sink, counting)
        .catch((error: unknown) => {
          throw brokenOff(error);
        })
        .finally(over);
    },
    piped() {
      if (empty) return { body: null, length: null };
      if (length === null) return null;
      // The runtime decodes gzip and br as it reads, and then the declared (wire) length is not the body's.
      const declared = raw.headers.has("content-encoding") ? null : Number(length);
      const fixed = declared !== null && Number.isSafeInteger(declared) ? declared : null;
      if (fixed !== null && fixed <= SEEN_AT_ONCE_BYTES) {
        // A small body (an image, a JSON document) goes on as it is: it follows its headers at once,
        // so it is counted whole now. Watching its end would cost a pipe per run (`npm run bench`, runcost).
        // The hang-up listener stays: a caller who goes while the app stalls mid-body still ends its call.
        tally.bytes = fixed;
        settle("done");
        return { body: raw.body, length: fixed };
      }
      const pipe = fixed !== null ? new FixedLengthStream(fixed) : new IdentityTransformStream();
      raw
        .body!.pipeTo(pipe.writable)
        .then(
          () => {
            // Whole: the declared length crossed (the wire length of an encoded answer).
            tally.bytes = Number(length);
            settle("done");
          },
          () => settle(cancel?.aborted ? "cancelled" : "broken"),
        )
        .finally(over);
      return { body: pipe.readable, length: fixed };
    },
    async text(max) {
      if (empty) return "";
      // A declared length is the decoded length only when nothing was encoded (the runtime decodes gzip
      // and br as it reads, and the header keeps the wire length).
      const length = raw.headers.has("content-encoding") ? null : raw.headers.get("content-length");
      const declared = length === null ? null : Number(length);
      try {
        if (declared !== null && declared > max) {
          await raw.body!.cancel().catch(() => undefined);
          return null;
        }
        if (declared !== null && Number.isFinite(declared)) {
          // The common case, a declared length within the limit: the runtime reads it in one go, far
          // cheaper than a chunk loop in JavaScript; one silence timer covers the whole read.
          const idle = setTimeout(() => end(new StreamIdle(limits.idleMs, appRequest.runId)), limits.idleMs);
          try {
            return await raw.text();
          } finally {
            clearTimeout(idle);
          }
        }
        // Each chunk copied out of the relay's buffer: what is kept holds only the bytes that arrived.
        const chunks: Uint8Array[] = [];
        let size = 0;
        const tooLarge = new DOMException("The answer is larger than the gateway reads", "AbortError");
        try {
          await relay(raw.body!, watch, (chunk) => {
            size += chunk.byteLength;
            if (size > max) throw tooLarge;
            chunks.push(chunk.slice());
          });
        } catch (error) {
          if (error === tooLarge) return null;
          throw error;
        }
        return new TextDecoder().decode(concat(chunks, size));
      } catch (error) {
        throw brokenOff(error);
      } finally {
        over();
      }
    },
  };
}

/**
 * Bodies of a declared length up to this size are counted whole when their headers come, not when the
 * caller has read them: within a few network reads of the headers, their end adds nothing a record
 * needs. Larger ones go through a pipe that tells when they ended (a download's duration, a hang-up).
 */
const SEEN_AT_ONCE_BYTES = 64 * 1024;

/** Statuses whose responses carry no body. */
export const NULL_BODY: ReadonlySet<number> = new Set([204, 205, 304]);
